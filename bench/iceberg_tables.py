"""The benchmarks' own Iceberg tables, through pyiceberg on the stack's REST catalog: dropped
before a run, read back to check that two jobs wrote the same rows."""

from __future__ import annotations

from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import NoSuchTableError

from lineage_assets.settings import Settings


def catalog(settings: Settings) -> Catalog:
    return load_catalog("bench", **{
        "type": "rest", "uri": settings.iceberg_catalog_url, "warehouse": settings.warehouse_url,
        "s3.endpoint": settings.s3_url, "s3.access-key-id": settings.s3_access_key,
        "s3.secret-access-key": settings.s3_secret_key, "s3.region": settings.s3_region,
        "s3.force-virtual-addressing": "false",
    })


def drop(settings: Settings, table: str) -> None:
    """Drop the table and its files; nothing to do when it does not exist."""
    try:
        catalog(settings).purge_table((settings.iceberg_namespace, table))
    except NoSuchTableError:
        pass


def rows(settings: Settings, table: str, columns: tuple[str, ...]) -> list[tuple]:
    """The table's current rows as tuples of ``columns``, sorted."""
    data = catalog(settings).load_table((settings.iceberg_namespace, table)).scan(selected_fields=columns).to_arrow()
    return sorted(zip(*(data.column(name).to_pylist() for name in columns)))

"""The lakehouse tables' upkeep on the real catalog: the `lakehouse_maintenance` job expires old
snapshots through Iceberg's own procedure, keeps the newest and the data, and stops the metadata
files of a table made before that was a table's default from piling up."""

from __future__ import annotations

import dataclasses

from lineage_assets.datasets import LAKEHOUSE_ORDERS, iceberg_table_name
from lineage_assets.definitions import build_definitions
from lineage_assets.job_specs import SNAPSHOTS_RETAINED, table_columns
from lineage_assets.resources.settings import SettingsResource
from spark.support.tables import METADATA_PROPERTIES, files_under

COMMITS = SNAPSHOTS_RETAINED + 12


def metadata_files(spark, table: str) -> int:
    location = spark.sql(f"DESCRIBE TABLE EXTENDED {table}").where("col_name = 'Location'").first().data_type
    return sum(name.endswith(".metadata.json") for name in files_under(spark, f"{location}/metadata"))


def test_the_upkeep_expires_all_but_the_newest_snapshots_and_keeps_every_row(stack, settings, spark):
    # A namespace of its own, with every snapshot older than the retention: only the newest 100 stay.
    probe = dataclasses.replace(settings, iceberg_namespace="maintenance_probe", snapshot_retention_hours=0)
    table = iceberg_table_name(probe, "orders")
    spark.sql(f"DROP TABLE IF EXISTS {table} PURGE")
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {probe.catalog_name}.`{probe.iceberg_namespace}`")
    # As an earlier version of the project made it: without METADATA_PROPERTIES, every metadata file kept.
    spark.sql(f"CREATE TABLE {table} ({table_columns(LAKEHOUSE_ORDERS)}) USING iceberg PARTITIONED BY (days(bid_time))")
    for commit in range(COMMITS):
        spark.sql(
            f"INSERT INTO {table} VALUES ('o-{commit}', 'lamp', 1.50, 'Alice', TIMESTAMP_NTZ '2026-11-20 10:00:00')"
        )
    current = spark.sql(f"SELECT snapshot_id FROM {table}.refs WHERE name = 'main'").first().snapshot_id
    assert metadata_files(spark, table) == COMMITS + 1

    job = build_definitions(SettingsResource.of(probe)).resolve_job_def("lakehouse_maintenance")
    result = job.execute_in_process()

    assert result.success
    (expired,) = result.output_for_node("expire_lakehouse_snapshots")  # supplier_stats is not there: skipped
    assert (expired["table"], expired["snapshots_before"], expired["snapshots_after"]) == (
        table,
        COMMITS,
        SNAPSHOTS_RETAINED,
    )
    assert expired["current_snapshot_id"] == current
    assert expired["deleted_manifest_lists_count"] == COMMITS - SNAPSHOTS_RETAINED
    spark.catalog.refreshTable(table)
    assert spark.table(f"{table}.snapshots").count() == SNAPSHOTS_RETAINED
    assert spark.table(table).count() == COMMITS  # no data changes
    # From now on the table deletes the metadata file its log lets go at each commit: no more pile up.
    properties = {row.key: row.value for row in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}
    assert METADATA_PROPERTIES.items() <= properties.items()
    before = metadata_files(spark, table)
    for commit in range(3):
        spark.sql(
            f"INSERT INTO {table} VALUES ('o-{commit}', 'lamp', 1.50, 'Bob', TIMESTAMP_NTZ '2026-11-20 11:00:00')"
        )
    assert metadata_files(spark, table) == before

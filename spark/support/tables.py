"""Iceberg tables and Hadoop paths as a job sees them: creating a table, its committed state and
quality, a query's checkpoint, the files below a path."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlparse

from pyspark.sql import SparkSession

from spark.support.quality import files_totals, table_quality_entry

# Every commit writes a metadata file; Iceberg keeps each earlier one too unless told to delete those
# that fall out of its metadata log (``write.metadata.previous-versions-max``, 100 by default).
METADATA_PROPERTIES = {"write.metadata.delete-after-commit.enabled": "true"}


def table_schema_id(spark: SparkSession, table: str) -> int | None:
    """The id of the table's current schema, from Iceberg's metadata log."""
    rows = spark.sql(
        f"SELECT latest_schema_id FROM {table}.metadata_log_entries ORDER BY timestamp DESC LIMIT 1"
    ).collect()
    return rows[0].latest_schema_id if rows else None


def current_snapshot_id(spark: SparkSession, table: str) -> int | None:
    """The table's current snapshot as committed now, the head of its ``main`` branch: after a
    rollback an older one than the last committed; None while it has none. Refreshed first (a
    streaming query's batches commit through another session's catalog cache), through the catalog
    API: a ``REFRESH TABLE`` statement ends before openlineage-spark's listener looks its execution
    up, which the agent logs as an ERROR."""
    spark.catalog.refreshTable(table)
    main = spark.sql(f"SELECT snapshot_id FROM {table}.refs WHERE name = 'main'").collect()
    return main[0].snapshot_id if main else None


def main_head(spark: SparkSession, table: str):
    """The head of the table's main branch as the session's catalog holds it: after the session's own
    commit, that commit's snapshot without a refresh (its id, parent id and summary)."""
    return spark.sql(
        f"SELECT s.snapshot_id, s.parent_id, s.summary FROM {table}.refs r "
        f"JOIN {table}.snapshots s ON s.snapshot_id = r.snapshot_id WHERE r.name = 'main'"
    ).collect()[0]


def committed(spark: SparkSession, table: str) -> dict:
    """What the session's one commit to ``table`` made, as a batch job's report gives it: the snapshot
    and its parent, the schema, the files and bytes added, and the whole table's ``quality``."""
    snapshot = main_head(spark, table)
    return {
        "snapshot_id": snapshot.snapshot_id,
        "parent_snapshot_id": snapshot.parent_id,
        "schema_id": table_schema_id(spark, table),
        "files_written": int(snapshot.summary.get("added-data-files", 0)),
        "bytes_written": int(snapshot.summary.get("added-files-size", 0)),
        "quality": table_quality(spark, table, snapshot.snapshot_id),  # from its manifests
    }


def snapshot_records(spark: SparkSession, table: str, snapshot_id: int | None) -> int | None:
    """The records of the table at ``snapshot_id``, from its summary (None: no snapshot)."""
    if snapshot_id is None:
        return None
    rows = spark.sql(f"SELECT summary FROM {table}.snapshots WHERE snapshot_id = {snapshot_id}").collect()
    return int(rows[0].summary.get("total-records", 0)) if rows else None


def _jvm(spark: SparkSession) -> Any:
    """The py4j view of the driver's JVM, through which the Java APIs below are called."""
    jvm = spark.sparkContext._jvm
    if jvm is None:
        raise RuntimeError("no JVM to call: the session's SparkContext has not started one")
    return jvm


def iceberg_table(spark: SparkSession, table: str):
    """The Iceberg table (its Java API) as ``spark``'s catalog holds it: its metadata without a query."""
    return _jvm(spark).org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, table)


def data_snapshot_id(spark: SparkSession, table: str, snapshot_id: int | None) -> int | None:
    """The snapshot whose rows ``snapshot_id`` holds, when that is another: a compaction commits a
    ``replace``, which rewrites files without changing the table's rows (Iceberg's spec), so its rows
    are those of its nearest ancestor that is no ``replace``. None when ``snapshot_id`` is none or its
    rows are its own. Through the table's metadata, not a query: no Spark job for a lookup."""
    if snapshot_id is None:
        return None
    iceberg = iceberg_table(spark, table)
    found, snapshot = None, iceberg.snapshot(snapshot_id)
    while snapshot is not None and snapshot.operation() == "replace":
        found = snapshot.parentId()  # kept on the snapshot even once its parent has expired
        snapshot = None if found is None else iceberg.snapshot(found)
    return found


def day_partition_column(spark: SparkSession, table: str) -> str | None:
    """The column whose UTC day partitions ``table`` (Iceberg's ``days`` transform), if one does."""
    iceberg = iceberg_table(spark, table)
    for field in iceberg.spec().fields():
        if str(field.transform().toString()) == "day":
            return str(iceberg.schema().findColumnName(field.sourceId()))
    return None


def table_as_of(spark: SparkSession, table: str, snapshot_id: int | None):
    """The table's rows at one snapshot: what a job reads is then exactly the version it reports."""
    return (
        spark.table(table) if snapshot_id is None else spark.sql(f"SELECT * FROM {table} VERSION AS OF {snapshot_id}")
    )


def table_state(spark: SparkSession, table: str) -> dict:
    """The table as committed now: its latest snapshot, schema id and ``quality``, from its metadata."""
    snapshot_id = current_snapshot_id(spark, table)
    return {
        "snapshot_id": snapshot_id,
        "schema_id": table_schema_id(spark, table),
        "quality": table_quality(spark, table, snapshot_id),
    }


def table_quality(spark: SparkSession, table: str, snapshot_id: int | None) -> dict | None:
    """The ``quality`` entry of the Iceberg table as of ``snapshot_id`` (None: it has none, it is empty)."""
    return table_quality_entry(*table_totals(spark, table, snapshot_id))


def table_totals(spark: SparkSession, table: str, snapshot_id: int | None) -> tuple[dict, list[str]]:
    """``files_totals`` of the Iceberg table as of ``snapshot_id`` (the current one when None)."""
    as_of = "" if snapshot_id is None else f" VERSION AS OF {snapshot_id}"
    return files_totals(spark.sql(f"SELECT * FROM {table}.files{as_of}"))


def create_table(
    spark: SparkSession,
    table: str,
    columns: str,
    partitioned_by: str | None = None,
    properties: dict[str, str] | None = None,
) -> bool:
    """Create the Iceberg table (format v2, parquet, snappy, ``METADATA_PROPERTIES`` and ``properties``)
    and its namespace if missing; True when this call created it. ``columns``: the catalog's, as
    ``lineage_assets.job_specs.table_columns`` lists them.

    What exists is asked of the catalog, not left to ``IF NOT EXISTS``: such a statement ends at once,
    before openlineage-spark's listener looks its execution up, which the agent logs as an ERROR."""
    if spark.catalog.tableExists(table.replace("`", "")):
        return False
    namespace = table.rsplit(".", 1)[0]
    if not spark.catalog.databaseExists(namespace.replace("`", "")):
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
    chosen = {
        "format-version": "2",
        "write.format.default": "parquet",
        "write.parquet.compression-codec": "snappy",
        **METADATA_PROPERTIES,
        **(properties or {}),
    }
    spark.sql(f"""
        CREATE TABLE IF NOT EXISTS {table} ({columns})
        USING iceberg {f"PARTITIONED BY ({partitioned_by})" if partitioned_by else ""}
        TBLPROPERTIES ({", ".join(f"'{key}'='{value}'" for key, value in chosen.items())})""")
    return True


def bound_metadata_files(spark: SparkSession, table: str) -> None:
    """``METADATA_PROPERTIES`` on ``table``, made before they were a table's defaults."""
    current = {row.key: row.value for row in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}
    missing = {key: value for key, value in METADATA_PROPERTIES.items() if current.get(key) != value}
    if missing:
        listed = ", ".join(f"'{key}'='{value}'" for key, value in missing.items())
        spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ({listed})")


def _hadoop_path(spark: SparkSession, location: str):
    """A Hadoop path and its file system (local, S3A): what Spark itself reads the location with."""
    path = _jvm(spark).org.apache.hadoop.fs.Path(location)
    return path, path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())


def planned_batches(spark: SparkSession, checkpoint: str) -> bool:
    """Whether a query's checkpoint already holds planned batches (its offset log is not empty)."""
    path, filesystem = _hadoop_path(spark, f"{checkpoint.rstrip('/')}/offsets")
    return bool(filesystem.exists(path) and filesystem.listStatus(path))


def files_under(spark: SparkSession, location: str) -> dict[str, int]:
    """The data files below a Hadoop path (relative to it) and their bytes, leaving out Spark's own
    metadata folders."""
    path, filesystem = _hadoop_path(spark, location)
    if not filesystem.exists(path):
        return {}
    files = {}
    listing = filesystem.listFiles(path, True)
    root = str(filesystem.makeQualified(path).toString()).rstrip("/") + "/"  # as the listing names files
    while listing.hasNext():
        status = listing.next()
        relative = str(status.getPath().toString())[len(root) :]
        if "_spark_metadata" in relative or relative.rsplit("/", 1)[-1].startswith((".", "_")):
            continue
        files[relative] = status.getLen()
    return files


def sink_files(spark: SparkSession, location: str, batch_id: int) -> dict[str, int]:
    """The files a file sink's log lists for one batch (relative to ``location``) and their bytes:
    the batch's own, or with a compacted batch every file the log holds up to it."""
    log = f"{location.rstrip('/')}/_spark_metadata/{batch_id}"
    root, filesystem = _hadoop_path(spark, location)
    for name in (log, f"{log}.compact"):
        path, _ = _hadoop_path(spark, name)
        if filesystem.exists(path):
            break
    else:
        return {}
    stream = filesystem.open(path)
    try:
        text = _jvm(spark).org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
    finally:
        stream.close()
    # By their URIs' paths: the log spells a local file file:///x, Hadoop's qualified path file:/x.
    prefix = urlparse(str(filesystem.makeQualified(root).toString())).path.rstrip("/") + "/"
    entries = [json.loads(line) for line in text.splitlines()[1:] if line.strip()]  # after the log's version line
    return {
        urlparse(entry["path"]).path[len(prefix) :]: entry["size"]
        for entry in entries
        if entry.get("action", "add") == "add" and urlparse(entry["path"]).path.startswith(prefix)
    }

"""The lakehouse tables' upkeep, with Iceberg's own procedures: compact the small files of a table's
closed days, expire old snapshots, bound the metadata files, and delete the files no snapshot holds.

    spark-submit spark/lakehouse_upkeep.py --compact lakehouse.`default`.orders \
        --closed-before 2026-11-28 \
        --table lakehouse.`default`.orders --table lakehouse.`default`.supplier_stats \
        --older-than 2026-11-28T06:00:00 --retain-last 100 \
        --orphans-older-than 2026-11-25T12:00:00 --report report.json

A continuous deployment commits every few seconds, and each commit writes a file per Kafka partition
and day: a day of 5 s commits is thousands of files, which every read of that day opens one by one.
The days before ``--closed-before`` (UTC) are bin-packed into files of the table's target size
(``rewrite_data_files``); the days still written to are left, so that no day is rewritten each hour.
The compaction commits a ``replace`` snapshot, which holds the same rows as its parent: the runs that
read it report whose rows it holds (``tables.data_snapshot_id``), so provenance passes over it.

Every commit also rewrites the table's metadata file, which lists every snapshot the table keeps:
thousands an hour make every later commit slower and every metadata file larger. Snapshots older
than ``--older-than`` (UTC) go, but never the last ``--retain-last``: a restarted stream looks for its
last batch's snapshot to tell whether that batch was committed. Files only the expired snapshots
reference are deleted (the compacted small files among them, once their snapshots have expired).

A write that fails before its commit (a deployment killed mid-batch, a job that ran out of memory)
leaves its files in the table's location, and so does a table's metadata file that no log lists any
more: no snapshot's expiry deletes them. The files older than ``--orphans-older-than`` that neither a
snapshot nor the metadata references go (``remove_orphan_files``). A write still in flight has
written files it has not committed yet, so the cut-off must lie before the start of the longest
write: Iceberg's procedure refuses one less than 24 hours ago.

A table that does not exist yet is skipped. No row changes, so the job reports no lineage.
"""

from __future__ import annotations

import argparse
import datetime as dt
import time

from pyspark.sql import SparkSession

from lineage_assets.job_specs import LakehouseUpkeepReport
from spark.support import reports, tables

CONCURRENT_DELETES = 8


def _procedure(spark: SparkSession, table: str, name: str, arguments: str) -> list[dict]:
    """The rows Iceberg's procedure ``name`` returns for ``table`` (catalog.namespace.table)."""
    # Named with its catalog: Iceberg would first take a bare namespace for a catalog, and log a failure.
    catalog = table.split(".", 1)[0]
    rows = spark.sql(f"CALL {catalog}.system.{name}(table => '{table}', {arguments})").collect()
    return [row.asDict() for row in rows]


def compact(spark: SparkSession, table: str, closed_before: dt.date) -> dict:
    """Bin-pack the data files of ``table``'s days before ``closed_before``; what was rewritten."""
    day_column = tables.day_partition_column(spark, table)
    if day_column is None:
        raise ValueError(f"--compact {table}: the table is not partitioned by the day of a column")
    # Partial progress: each group of files (a day, mostly) commits when packed, so an upkeep stopped
    # midway through a backlog of days (its run's maximum runtime) keeps what it packed.
    (counts,) = _procedure(
        spark,
        table,
        "rewrite_data_files",
        f"where => \"{day_column} < TIMESTAMP_NTZ '{closed_before}'\", "
        "options => map('partial-progress.enabled', 'true')",
    )
    return {
        "table": table,
        "closed_before": closed_before.isoformat(),
        "current_snapshot_id": tables.current_snapshot_id(spark, table),
        **{name: count for name, count in counts.items() if name.endswith("_count")},
    }


def expire(spark: SparkSession, table: str, older_than: dt.datetime, retain_last: int) -> dict:
    """Bound ``table``'s metadata files and expire its snapshots; what it held and what went."""
    tables.bound_metadata_files(spark, table)
    before = spark.table(f"{table}.snapshots").count()
    # Deletes in parallel: the file system deletes one file per call (an hour of 5 s commits leaves 1,200).
    (deleted,) = _procedure(
        spark,
        table,
        "expire_snapshots",
        f"older_than => TIMESTAMP '{older_than:%Y-%m-%d %H:%M:%S}', retain_last => {retain_last}, "
        f"max_concurrent_deletes => {CONCURRENT_DELETES}",
    )
    return {
        "table": table,
        "snapshots_before": before,
        "snapshots_after": spark.table(f"{table}.snapshots").count(),
        "current_snapshot_id": tables.current_snapshot_id(spark, table),
        **{name: count for name, count in deleted.items() if name.startswith("deleted_")},
    }


def remove_orphans(spark: SparkSession, table: str, older_than: dt.datetime) -> dict:
    """Delete the files in ``table``'s location older than ``older_than`` that neither a snapshot nor
    the table's metadata references; which went."""
    deleted = _procedure(
        spark,
        table,
        "remove_orphan_files",
        f"older_than => TIMESTAMP '{older_than:%Y-%m-%d %H:%M:%S}', max_concurrent_deletes => {CONCURRENT_DELETES}",
    )
    return {
        "table": table,
        "older_than": older_than.isoformat(timespec="seconds"),
        "deleted_orphan_files": sorted(row["orphan_file_location"] for row in deleted),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compact", action="append", default=[], help="an Iceberg table whose closed days to compact")
    parser.add_argument("--closed-before", type=dt.date.fromisoformat, help="UTC day: the days before it are closed")
    parser.add_argument(
        "--table", action="append", required=True, help="an Iceberg table to expire and clear of orphans"
    )
    parser.add_argument("--older-than", required=True, type=dt.datetime.fromisoformat, help="UTC, ISO 8601")
    parser.add_argument("--retain-last", required=True, type=int, help="snapshots kept whatever their age")
    parser.add_argument("--orphans-older-than", required=True, type=dt.datetime.fromisoformat, help="UTC, ISO 8601")
    parser.add_argument("--report", required=True)
    args = parser.parse_args()
    if args.retain_last < 1:
        parser.error(f"--retain-last {args.retain_last}: a table keeps at least its current snapshot (1 or more)")
    if args.compact and not args.closed_before:
        parser.error(f"--compact {args.compact[0]}: needs --closed-before")
    started = time.monotonic()
    spark = SparkSession.builder.getOrCreate()

    def exists(table: str) -> bool:
        return spark.catalog.tableExists(table.replace("`", ""))

    # Compacted first: the small files' snapshots then expire with the others, and their files go.
    compacted = [compact(spark, table, args.closed_before) for table in args.compact if exists(table)]
    expired = [expire(spark, table, args.older_than, args.retain_last) for table in args.table if exists(table)]
    # After the expiry: fewer snapshots' manifests to read, and the files it deleted are not listed.
    orphans = [remove_orphans(spark, table, args.orphans_older_than) for table in args.table if exists(table)]
    reports.write_report(
        args.report, LakehouseUpkeepReport, started, compacted=compacted, expired=expired, orphans=orphans
    )
    spark.stop()


if __name__ == "__main__":
    main()

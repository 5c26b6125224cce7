"""The lakehouse tables' upkeep, with Iceberg's own procedures: compact the small files of a table's
closed days, expire old snapshots, and bound the metadata files.

    spark-submit spark/lakehouse_upkeep.py --compact lakehouse.`default`.orders \
        --closed-before 2026-11-28 \
        --table lakehouse.`default`.orders --table lakehouse.`default`.supplier_stats \
        --older-than 2026-11-28T06:00:00 --retain-last 100 --report report.json

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


def _procedure(spark: SparkSession, table: str, name: str, arguments: str) -> dict:
    """One row of counts Iceberg's procedure ``name`` returns for ``table`` (catalog.namespace.table)."""
    catalog, identifier = table.split(".", 1)
    (counts,) = spark.sql(f"CALL {catalog}.system.{name}(table => '{identifier}', {arguments})").collect()
    return counts.asDict()


def compact(spark: SparkSession, table: str, closed_before: dt.date) -> dict:
    """Bin-pack the data files of ``table``'s days before ``closed_before``; what was rewritten."""
    day_column = tables.day_partition_column(spark, table)
    if day_column is None:
        raise ValueError(f"--compact {table}: the table is not partitioned by the day of a column")
    counts = _procedure(
        spark, table, "rewrite_data_files", f"where => \"{day_column} < TIMESTAMP_NTZ '{closed_before}'\""
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
    deleted = _procedure(
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compact", action="append", default=[], help="an Iceberg table whose closed days to compact")
    parser.add_argument("--closed-before", type=dt.date.fromisoformat, help="UTC day: the days before it are closed")
    parser.add_argument("--table", action="append", required=True, help="an Iceberg table whose snapshots to expire")
    parser.add_argument("--older-than", required=True, type=dt.datetime.fromisoformat, help="UTC, ISO 8601")
    parser.add_argument("--retain-last", required=True, type=int, help="snapshots kept whatever their age")
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
    reports.write_report(args.report, LakehouseUpkeepReport, started, compacted=compacted, expired=expired)
    spark.stop()


if __name__ == "__main__":
    main()

"""Expire the lakehouse tables' old snapshots with Iceberg's own procedure, and bound their metadata files.

    spark-submit spark/expire_snapshots.py --table lakehouse.`default`.orders \
        --table lakehouse.`default`.supplier_stats --older-than 2026-11-28T06:00:00 --retain-last 100 \
        --report report.json

Every commit rewrites the table's metadata file, which lists every snapshot the table keeps: a
continuous deployment committing every few seconds makes thousands an hour, and each one kept makes
every later commit slower and every metadata file larger. Snapshots older than ``--older-than`` (UTC)
go, but never the last ``--retain-last``: a restarted stream looks for its last batch's snapshot to
tell whether that batch was committed. Files only the expired snapshots reference are deleted.
A table that does not exist yet is skipped. No data changes, so the job reports no lineage.
"""

from __future__ import annotations

import argparse
import datetime as dt
import time

from pyspark.sql import SparkSession

from lineage_assets.job_specs import SnapshotExpiryReport
from spark.support import reports, tables

CONCURRENT_DELETES = 8


def expire(spark: SparkSession, table: str, older_than: dt.datetime, retain_last: int) -> dict:
    """Bound ``table``'s metadata files and expire its snapshots; what it held and what went."""
    tables.bound_metadata_files(spark, table)
    catalog, identifier = table.split(".", 1)
    before = spark.table(f"{table}.snapshots").count()
    # Deletes in parallel: the file system deletes one file per call (an hour of 5 s commits leaves 1,200).
    (deleted,) = spark.sql(
        f"CALL {catalog}.system.expire_snapshots(table => '{identifier}', "
        f"older_than => TIMESTAMP '{older_than:%Y-%m-%d %H:%M:%S}', retain_last => {retain_last}, "
        f"max_concurrent_deletes => {CONCURRENT_DELETES})"
    ).collect()
    return {
        "table": table,
        "snapshots_before": before,
        "snapshots_after": spark.table(f"{table}.snapshots").count(),
        "current_snapshot_id": tables.current_snapshot_id(spark, table),
        **{name: count for name, count in deleted.asDict().items() if name.startswith("deleted_")},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--table", action="append", required=True, help="an Iceberg table, as Spark SQL names it")
    parser.add_argument("--older-than", required=True, type=dt.datetime.fromisoformat, help="UTC, ISO 8601")
    parser.add_argument("--retain-last", required=True, type=int, help="snapshots kept whatever their age")
    parser.add_argument("--report", required=True)
    args = parser.parse_args()
    if args.retain_last < 1:
        parser.error(f"--retain-last {args.retain_last}: a table keeps at least its current snapshot (1 or more)")
    started = time.monotonic()
    spark = SparkSession.builder.getOrCreate()
    expired = [
        expire(spark, table, args.older_than, args.retain_last)
        for table in args.table
        if spark.catalog.tableExists(table.replace("`", ""))
    ]
    reports.write_report(args.report, SnapshotExpiryReport, started, tables=expired)
    spark.stop()


if __name__ == "__main__":
    main()

"""Iceberg `orders` -> Iceberg `supplier_stats` for one day: SUM(price), COUNT(*) per supplier and hour.

    spark-submit spark/supplier_stats.py --source lakehouse.`default`.orders \
        --target lakehouse.`default`.supplier_stats --columns 'supplier string, ...' --day 2026-11-21 \
        --report report.json

The run replaces exactly that day's rows (one atomic overwrite by bid_date), so re-runs and
backfills are idempotent; a day with no orders is left empty. Without --day, the latest day
present in the source is used (not the wall-clock date: a run after midnight must not read nothing).
"""

from __future__ import annotations

import argparse
import datetime as dt
import time
from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lineage_assets.job_specs import PROGRESS_PREFIX, SupplierStatsReport
from spark import lineage, transforms
from spark.support import reports, tables


def latest_day(source: DataFrame) -> dt.date | None:
    return source.select(F.max(F.to_date("bid_time")).alias("day")).collect()[0].day


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--source", required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument("--columns", required=True, help="the target's columns, as CREATE TABLE lists them")
    parser.add_argument("--day", type=dt.date.fromisoformat, help="UTC day to compute (default: latest present)")
    parser.add_argument("--report", required=True)
    return parser


def written(source: DataFrame, day: dt.date) -> DataFrame:
    """The rows the job writes for ``day`` from the ``source`` table's orders."""
    return transforms.hourly_supplier_stats(transforms.orders_of_day(source, day))


def column_lineage(stats: DataFrame, day: dt.date, inputs: Mapping[str, DataFrame] | None = None) -> dict:
    """The column lineage of ``stats`` (``spark/lineage.observe``), whose derivations name the run's day."""
    return lineage.observe(stats, inputs, parameters={"day": day})


def main() -> None:
    args = parser().parse_args()
    started = time.monotonic()
    spark = SparkSession.builder.getOrCreate()
    created = tables.create_table(spark, args.target, args.columns, "bid_date, bid_hour")
    # One snapshot of the source, read and reported: the figures can be traced to the very data they come from.
    read = {"source_snapshot_id": tables.current_snapshot_id(spark, args.source)}
    read["source_schema_id"] = tables.table_schema_id(spark, args.source) if read["source_snapshot_id"] else None
    read["source_data_snapshot_id"] = tables.data_snapshot_id(spark, args.source, read["source_snapshot_id"])
    source = tables.table_as_of(spark, args.source, read["source_snapshot_id"])
    day = args.day or latest_day(source)
    if day is None:
        reports.write_report(
            args.report,
            SupplierStatsReport,
            started,
            day=None,
            rows_in=0,
            rows_written=0,
            table_created=created,
            **read,
        )
        spark.stop()
        return

    print(f"{PROGRESS_PREFIX}computing {day} from {args.source} at snapshot {read['source_snapshot_id']}", flush=True)
    stats = written(source, day).persist()
    observed = column_lineage(stats, day)
    stats.writeTo(args.target).overwrite(F.col("bid_date") == F.lit(day))
    print(f"{PROGRESS_PREFIX}replaced {day} in {args.target} after {time.monotonic() - started:.0f} s", flush=True)
    totals = stats.orderBy("supplier", "bid_hour").collect()
    reports.write_report(
        args.report,
        SupplierStatsReport,
        started,
        day=day.isoformat(),
        **read,
        column_lineage=observed,
        rows_in=sum(r.total_count for r in totals),  # every order of the day is in exactly one total
        rows_written=len(totals),
        table_created=created,
        **tables.committed(spark, args.target),
        totals=[
            {
                "supplier": r.supplier,
                "bid_hour": r.bid_hour,
                "total_price": str(r.total_price),
                "total_count": r.total_count,
            }
            for r in totals
        ],
    )
    spark.stop()


if __name__ == "__main__":
    main()

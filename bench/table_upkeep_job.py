"""spark-submit job: commit to a fresh Iceberg table until it has aged, run the upkeep, commit again
(the ``table_upkeep`` benchmark).

    spark-submit bench/table_upkeep_job.py --table lakehouse.`default`.bench_upkeep --commits 2000 \
        --window 50 --report report.json

Each commit appends a few orders of one day with the ingestion's table and snapshot properties, as a
continuous deployment's micro-batch does, after as many to a table of its own to warm the JVM up.
After ``--commits`` of them, `supplier_stats`' aggregation reads the day, the upkeep's own
``compact``, ``expire`` (the day closed, every snapshot past the retention: the newest 100 stay) and
``remove_orphans`` (the default orphan age: no file is that old, so it costs the whole scan and
deletes nothing) run, the day is read again, and ``--window`` commits follow, in the same JVM, so that no warm-up
lies between the commits or the reads compared.
"""

from __future__ import annotations

import argparse
import datetime as dt
import time
from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lineage_assets.datasets import LAKEHOUSE_ORDERS
from lineage_assets.job_specs import Report, table_columns
from lineage_assets.settings import Settings
from spark import transforms
from spark.ingest_orders import BATCH_PROPERTY, PARTITIONED_BY, QUERY_PROPERTY, WRITE_PROPERTIES
from spark.lakehouse_upkeep import compact, expire, remove_orphans
from spark.support import reports, tables

ROWS_PER_COMMIT = 100
WARM_UP_COMMITS = 150
DAY = dt.date(2026, 11, 20)  # the orders' day, closed for the compaction
READS = 2  # of the day, before and after the upkeep: the faster counts (the first also warms up)


@dataclass(frozen=True, kw_only=True)
class TableUpkeepReport(Report):
    commit_ms: list[float]  # each commit before the upkeep, in order
    compacted: dict  # compact()'s account of the table
    expired: dict  # expire()'s
    orphans: dict  # remove_orphans()'s
    upkeep_s: float  # the three
    orphans_s: float  # remove_orphans() alone
    read_ms: float  # `supplier_stats`' aggregation of the day before the upkeep
    read_after_ms: float  # and after it
    same_totals: bool  # whether both reads gave the same totals
    commit_after_ms: list[float]  # each commit after the upkeep


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--table", required=True)
    parser.add_argument("--commits", type=int, required=True, help="commits before the upkeep")
    parser.add_argument("--window", type=int, required=True, help="commits after it")
    parser.add_argument("--retain-last", type=int, required=True, help="snapshots the upkeep keeps")
    parser.add_argument("--report", required=True)
    args = parser.parse_args()
    started = time.monotonic()
    spark = SparkSession.builder.getOrCreate()
    rows = (
        spark.range(ROWS_PER_COMMIT)
        .select(
            F.concat(F.lit("o-"), F.col("id").cast("string")).alias("order_id"),
            F.lit("Desk Lamp").alias("item"),
            F.lit("12.50").cast("decimal(10,2)").alias("price"),
            F.concat(F.lit("supplier-"), (F.col("id") % 7).cast("string")).alias("supplier"),
            (F.lit(dt.datetime.combine(DAY, dt.time(10))) + F.make_interval(secs=F.col("id")))
            .cast("timestamp_ntz")
            .alias("bid_time"),
        )
        .cache()
    )
    rows.count()

    def fresh(table: str) -> str:
        spark.sql(f"DROP TABLE IF EXISTS {table} PURGE")
        tables.create_table(spark, table, table_columns(LAKEHOUSE_ORDERS), PARTITIONED_BY, WRITE_PROPERTIES)
        return table

    def commits(table: str, first: int, count: int) -> list[float]:
        taken = []
        for batch in range(first, first + count):
            before = time.perf_counter()
            (
                rows.writeTo(table)
                .option(f"snapshot-property.{QUERY_PROPERTY}", "bench/table_upkeep/checkpoint")
                .option(f"snapshot-property.{BATCH_PROPERTY}", str(batch))
                .append()
            )
            taken.append(round((time.perf_counter() - before) * 1000, 1))
        return taken

    def read_day(table: str) -> tuple[float, list]:
        """The fastest of ``READS`` aggregations of the day, and the totals."""
        taken = []
        for _ in range(READS):
            before = time.perf_counter()
            totals = transforms.hourly_supplier_stats(transforms.orders_of_day(spark.table(table), DAY)).collect()
            taken.append(round((time.perf_counter() - before) * 1000, 1))
        return min(taken), sorted(totals)

    # Commits to a table of its own first, dropped after: the JVM's code is compiled before the measure.
    commits(fresh(f"{args.table}_warm_up"), 0, WARM_UP_COMMITS)
    spark.sql(f"DROP TABLE {args.table}_warm_up PURGE")
    aged = commits(fresh(args.table), 0, args.commits)
    read_ms, totals = read_day(args.table)
    before = time.perf_counter()
    compacted = compact(spark, args.table, DAY + dt.timedelta(days=1))
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    expired = expire(spark, args.table, now, args.retain_last)
    orphans_started = time.perf_counter()
    orphans = remove_orphans(spark, args.table, now - dt.timedelta(hours=Settings.orphan_file_age_hours))
    upkeep_s = round(time.perf_counter() - before, 2)
    orphans_s = round(time.perf_counter() - orphans_started, 2)
    read_after_ms, totals_after = read_day(args.table)
    after = commits(args.table, args.commits, args.window)
    spark.sql(f"DROP TABLE {args.table} PURGE")
    reports.write_report(
        args.report,
        TableUpkeepReport,
        started,
        commit_ms=aged,
        compacted=compacted,
        expired=expired,
        orphans=orphans,
        upkeep_s=upkeep_s,
        orphans_s=orphans_s,
        read_ms=read_ms,
        read_after_ms=read_after_ms,
        same_totals=totals == totals_after,
        commit_after_ms=after,
    )
    spark.stop()


if __name__ == "__main__":
    main()

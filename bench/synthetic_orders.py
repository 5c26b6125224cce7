"""spark-submit job: fill days of the Iceberg `orders` table with synthetic orders (batch benchmarks).

    spark-submit bench/synthetic_orders.py --table lakehouse.`default`.orders \
        --day 2025-01-14=10000 --day 2025-01-16=40000 --report report.json

Each day gets exactly its count of orders, spread evenly over the day, with the schema and
partitioning the ingestion job writes (its own CREATE TABLE). A day that already holds that count
is left alone, so the large days are generated once per bench state; any other day is replaced.
"""

from __future__ import annotations

import argparse
import datetime as dt
import time
from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lineage_assets.datasets import LAKEHOUSE_ORDERS
from lineage_assets.generator import ITEMS, SUPPLIERS
from lineage_assets.job_specs import Report, table_columns
from spark.ingest_orders import PARTITIONED_BY
from spark.support import reports, tables
from spark.transforms import PRICE_TYPE


@dataclass(frozen=True, kw_only=True)
class SyntheticOrdersReport(Report):
    generated: dict[str, int]  # orders generated per day (0: the day held its count already)


def day_and_count(text: str) -> tuple[dt.date, int]:
    day, count = text.split("=")
    return dt.date.fromisoformat(day), int(count)


def synthetic_orders(spark: SparkSession, day: dt.date, count: int):
    """``count`` orders whose bid times step evenly through ``day`` (UTC); other fields pseudo-random."""
    midnight = dt.datetime.combine(day, dt.time(), dt.UTC).timestamp()
    pick = lambda values, salt: F.element_at(  # noqa: E731
        F.array(*[F.lit(v) for v in values]), F.pmod(F.hash("id", F.lit(salt)), F.lit(len(values))) + 1
    )
    return spark.range(count).select(
        F.expr("uuid()").alias("order_id"),
        pick(ITEMS, 1).alias("item"),
        (F.pmod(F.hash("id", F.lit(2)), F.lit(14_900)) / 100 + 1).cast(PRICE_TYPE).alias("price"),
        pick(SUPPLIERS, 3).alias("supplier"),
        F.timestamp_seconds(F.lit(midnight) + F.col("id") * (86_400 / count)).cast("timestamp_ntz").alias("bid_time"),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--table", required=True)
    parser.add_argument("--day", action="append", type=day_and_count, required=True, help="YYYY-MM-DD=COUNT")
    parser.add_argument("--report", required=True)
    args = parser.parse_args()
    started = time.monotonic()
    spark = SparkSession.builder.getOrCreate()
    tables.create_table(spark, args.table, table_columns(LAKEHOUSE_ORDERS), PARTITIONED_BY)
    generated = {}
    for day, count in args.day:
        present = spark.table(args.table).where(F.to_date("bid_time") == F.lit(day)).count()
        if present != count:
            # No shuffle by partition before writing: both cores write (the day is one partition).
            synthetic_orders(spark, day, count).writeTo(args.table).option(
                "distribution-mode", "none"
            ).overwritePartitions()
        generated[day.isoformat()] = count if present != count else 0
    reports.write_report(args.report, SyntheticOrdersReport, started, generated=generated)
    spark.stop()


if __name__ == "__main__":
    main()

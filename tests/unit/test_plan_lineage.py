"""Column lineage read from Spark's analyzed plans of the jobs' own code at design time (empty inputs,
no stack), held against the designed lineage; and the everyday edits of `spark/` a reviewer must
see, each named with both derivations before anything runs."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from pyspark.sql import Observation
from pyspark.sql import functions as F

from lineage_assets import job_specs
from lineage_assets.datasets import (
    ARCHIVE,
    LAKEHOUSE_ORDERS,
    ORDERS_AVRO_SCHEMA,
    SUPPLIER_STATS,
    SUPPLIER_STATS_LIVE,
    orders_reader_schema_json,
)
from lineage_assets.lineage import design_time, observed
from lineage_assets.settings_environment import settings_from_env
from lineage_assets.source_schemas import WriterVersion
from spark import ingest_orders, lineage, transforms

SETTINGS = settings_from_env({})
ORDERS_TABLE = "table:lakehouse.default.orders"
MADE = "the job's plan makes"


def gaps(spark, dataset) -> list[str]:
    return design_time.design_gaps(spark, SETTINGS, [dataset.key])


def catalog(dataset, column: str) -> str:
    return dataset.designed.columns[column]


@pytest.fixture(scope="module")
def table(spark):
    return spark.createDataFrame(
        [], "order_id string, item string, price decimal(10,2), supplier string, bid_time timestamp_ntz"
    )


def test_every_jobs_plan_makes_the_designed_lineage(spark):
    assert design_time.design_gaps(spark, SETTINGS) == []


def test_a_derivation_names_its_literals_flags_and_the_runs_parameters(spark, table):
    stats = transforms.hourly_supplier_stats(transforms.orders_of_day(table, dt.date(2026, 11, 21)))
    report = lineage.observe(stats, {ORDERS_TABLE: table}, parameters={"day": dt.date(2026, 11, 21)})
    made = observed.derivations_of(report, SETTINGS)
    assert made.columns["total_price"] == "cast(sum(lakehouse/orders.price) as decimal(10,2))"
    assert made.inputs["total_price"] == (("lakehouse/orders", "price", "DIRECT", "AGGREGATION"),)
    assert made.inputs["total_count"] == ()  # COUNT(*) reads no column
    assert (
        "lakehouse/orders",
        "bid_time",
        "FILTER",
        "rows where (to_date(lakehouse/orders.bid_time, None, Some(UTC), true) = :day)",
    ) in made.rows
    assert made.schema[3] == ("total_price", "decimal(10,2)")


def test_a_changed_window_length_is_named_with_both_derivations(spark, monkeypatch):
    windowed = transforms.windowed_supplier_stats
    monkeypatch.setattr(
        transforms, "windowed_supplier_stats", lambda valid, window, watermark: windowed(valid, 10, watermark)
    )
    start = catalog(SUPPLIER_STATS_LIVE, "window_start")
    assert "5000000" in start
    assert (
        f"supplier_stats_live.window_start: the catalog says {start}, {MADE} {start.replace('5000000', '10000000')}"
        in gaps(spark, SUPPLIER_STATS_LIVE)
    )


def test_a_changed_literal_of_a_column_that_reads_no_field_is_named(spark, monkeypatch):
    count = F.count

    def counting_zeros(column):
        return count(F.lit(0)) if str(column) == str(F.lit(1)) else count(column)

    monkeypatch.setattr(F, "count", counting_zeros)
    count_of = "lakehouse/supplier_stats.total_count: the catalog says cast(count(1) as bigint)"
    assert gaps(spark, SUPPLIER_STATS) == [f"{count_of}, {MADE} cast(count(0) as bigint)"]


def test_a_distinct_sum_is_named_with_both_derivations(spark, monkeypatch):
    def distinct_sums(orders):
        return (
            orders.groupBy("supplier", F.to_date("bid_time").alias("bid_date"), F.hour("bid_time").alias("bid_hour"))
            .agg(F.sum_distinct("price").alias("total_price"), F.count(F.lit(1)).alias("total_count"))
            .select(
                "supplier",
                "bid_date",
                "bid_hour",
                F.col("total_price").cast(transforms.PRICE_TYPE).alias("total_price"),
                F.col("total_count").cast("long").alias("total_count"),
            )
        )

    monkeypatch.setattr(transforms, "hourly_supplier_stats", distinct_sums)
    assert gaps(spark, SUPPLIER_STATS) == [
        "lakehouse/supplier_stats.total_price: the catalog says cast(sum(lakehouse/orders.price) as decimal(10,2)), "
        f"{MADE} cast(sum(distinct lakehouse/orders.price) as decimal(10,2))"
    ]


def test_a_changed_predicate_is_named_with_both_predicates(spark, monkeypatch):
    monkeypatch.setattr(
        transforms, "orders_of_day", lambda orders, day: orders.where(F.to_date("bid_time") <= F.lit(day))
    )
    day = "lakehouse/orders.bid_time FILTER: rows where (to_date(lakehouse/orders.bid_time, None, Some(UTC), true)"
    assert gaps(spark, SUPPLIER_STATS) == [
        f"rows of lakehouse/supplier_stats: the catalog says {day} = :day), {MADE} without it",
        f"rows of lakehouse/supplier_stats: the catalog does not say {day} <= :day), {MADE} it",
    ]


def test_a_changed_cast_is_named_in_the_derivation_and_the_schema(spark, monkeypatch):
    monkeypatch.setattr(transforms, "PRICE_TYPE", "DECIMAL(8,0)")
    found = gaps(spark, LAKEHOUSE_ORDERS)
    assert (
        "lakehouse/orders.price: the catalog says try_cast(orders.price as decimal(10,2)), "
        f"{MADE} try_cast(orders.price as decimal(8,0))"
    ) in found
    assert any(gap.startswith("schema of lakehouse/orders: ") and "price decimal(8,0)" in gap for gap in found)


def test_an_input_that_is_no_dataset_of_the_catalog_is_named(spark, monkeypatch):
    hourly = transforms.hourly_supplier_stats

    def with_discounts(orders):
        discounts = orders.sparkSession.createDataFrame([("Alice", 0.1)], "supplier string, discount double")
        return hourly(orders.join(discounts, "supplier", "left").withColumn("price", F.col("price") * 1))

    monkeypatch.setattr(transforms, "hourly_supplier_stats", with_discounts)
    found = gaps(spark, SUPPLIER_STATS)
    assert found[0] == "lakehouse/supplier_stats reads unnamed:LogicalRDD, which is no input of the asset"
    assert any("LeftOuter join on (lakehouse/orders.supplier = unnamed:LogicalRDD.supplier)" in gap for gap in found)


def test_a_table_the_plan_cannot_find_is_named(spark, monkeypatch):
    hourly = transforms.hourly_supplier_stats

    def with_discounts(orders):
        discounts = orders.sparkSession.table("nowhere.discounts")
        return hourly(orders.join(discounts, "supplier", "left"))

    monkeypatch.setattr(transforms, "hourly_supplier_stats", with_discounts)
    [found] = gaps(spark, SUPPLIER_STATS)
    assert found.startswith("lakehouse/supplier_stats: the job's plan cannot be made: ")
    assert "discounts" in found


def test_a_dropped_column_is_named_and_the_schema_written_too(spark, monkeypatch):
    records = transforms.archive_records
    monkeypatch.setattr(transforms, "archive_records", lambda decoded: records(decoded).drop("item"))
    found = gaps(spark, ARCHIVE)
    assert f"orders_archive.item: the catalog says orders.item, {MADE} no such column" in found
    assert any(gap.startswith("schema of orders_archive: ") for gap in found)


def test_a_value_changed_under_a_condition_is_named_with_what_spark_ran(spark, monkeypatch):
    """The doubling of one supplier's prices (the wrong deploy of the end-to-end tests)."""
    rows = transforms.iceberg_orders

    def doubled_for_alice(valid):
        written = rows(valid)
        doubled = F.when(F.col("supplier") == "Alice", F.col("price") * 2).otherwise(F.col("price"))
        return written.withColumn("price", doubled.cast(written.schema["price"].dataType))

    monkeypatch.setattr(transforms, "iceberg_orders", doubled_for_alice)
    [found] = gaps(spark, LAKEHOUSE_ORDERS)
    assert found.startswith(
        f"lakehouse/orders.price: the catalog says try_cast(orders.price as decimal(10,2)), {MADE} cast(CASE WHEN "
        "(orders.supplier = Alice) THEN (try_cast(orders.price as decimal(10,2)) * cast(2 as decimal(1,0)))"
    )


def test_a_registered_version_changes_no_derivation(spark):
    """What the registry decides (which writer versions decode, and why others cannot) is named, not
    spelled out: a run with other versions registered observes the design's derivations."""
    renamed = {
        **ORDERS_AVRO_SCHEMA,
        "fields": [*ORDERS_AVRO_SCHEMA["fields"][:4], {"name": "vendor", "type": "string"}],
    }
    versions = {
        1: WriterVersion("orders-value", 1, 1, orders_reader_schema_json(), ()),
        7: WriterVersion("orders-value", 2, 7, json.dumps(renamed), ("supplier is missing",)),
    }
    batch = spark.createDataFrame([], design_time.KAFKA_BATCH)
    args = ingest_orders.parser().parse_args([*job_specs.ingestion_job(SETTINGS).arguments, "--report", "-"])
    rows = ingest_orders.BatchPlan(args.value_schema, versions, {}).rows(batch, Observation("versions"))
    made = observed.derivations_of(ingest_orders.column_lineage(rows, batch, args), SETTINGS)
    assert observed.derivation_gaps(LAKEHOUSE_ORDERS, made) == []

"""Column lineage read from Spark's analyzed plans of the jobs' own transforms, held against the catalog;
and the same transforms changed one column at a time, which the comparison must name."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from pyspark.sql import functions as F

from lineage_assets.datasets import (
    ARCHIVE,
    LAKEHOUSE_ORDERS,
    ORDERS_AVRO_SCHEMA,
    SUPPLIER_STATS,
    SUPPLIER_STATS_LIVE,
    orders_reader_schema_json,
)
from lineage_assets.lineage import observed
from lineage_assets.settings import Settings
from lineage_assets.source_schemas import WriterVersion, judge
from spark import lineage, transforms
from spark.ingest_orders import BatchPlan
from spark.support import quality

SETTINGS = Settings.from_env({})
VERSIONS = {
    3: WriterVersion(
        "orders-value", 1, 3, json.dumps(ORDERS_AVRO_SCHEMA), judge(ORDERS_AVRO_SCHEMA, ORDERS_AVRO_SCHEMA)
    )
}
ORDERS_TABLE = "table:lakehouse.default.orders"
DAY = dt.date(2026, 11, 21)


@pytest.fixture(scope="module")
def topic(spark):
    """The orders topic as the jobs read it: a Kafka streaming relation (never started)."""
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", "127.0.0.1:9")
        .option("subscribe", SETTINGS.orders_topic)
        .option("includeHeaders", "true")
        .load()
    )


@pytest.fixture(scope="module")
def table(spark):
    return spark.createDataFrame(
        [], "order_id string, item string, price decimal(10,2), supplier string, bid_time timestamp_ntz"
    )


def decoded(topic):
    return transforms.decode_orders(topic, orders_reader_schema_json(), VERSIONS)


def gaps(dataset, frame, **observe) -> list[str]:
    kinds = {
        column: observed.kinds_of(sources)
        for column, sources in observed.from_report(lineage.observe(frame, **observe), dataset, SETTINGS).items()
    }
    return [str(gap) for gap in observed.gaps(dataset, kinds)]


def archive(topic):
    return quality.ColumnMetrics().observed(transforms.archive_records(decoded(topic)))


def live(topic, stats=transforms.windowed_supplier_stats):
    return transforms.supplier_stats_records(stats(transforms.valid_orders(decoded(topic))))


def ingested(topic, rows=transforms.iceberg_orders):
    """A micro-batch's rows as the ingestion writes them (the plan of a batch: the source's columns)."""
    plan = BatchPlan(orders_reader_schema_json(), VERSIONS, {})
    needed = plan.decode(topic).select(*transforms.ICEBERG_ORDER_COLUMNS, "schema_id", "dead_letter_reason", "replayed")
    return rows(transforms.valid_orders(needed))


def daily(table, stats=transforms.hourly_supplier_stats):
    return stats(transforms.orders_of_day(table, DAY))


def test_each_jobs_plan_observes_exactly_the_catalogs_column_lineage(topic, table):
    assert gaps(ARCHIVE, archive(topic)) == []
    assert gaps(SUPPLIER_STATS_LIVE, live(topic), expand="value") == []
    assert gaps(LAKEHOUSE_ORDERS, ingested(topic)) == []
    assert gaps(SUPPLIER_STATS, daily(table), source=ORDERS_TABLE) == []


def test_each_input_field_has_its_own_transformation(table):
    report = lineage.observe(daily(table), source=ORDERS_TABLE)
    total = {(entry["field"], entry["type"], entry["subtype"]) for entry in report["columns"]["total_price"]}
    assert total == {("price", "DIRECT", "AGGREGATION")}
    assert {(entry["field"], entry["subtype"]) for entry in report["dataset"]} == {
        ("bid_time", "FILTER"),
        ("bid_time", "GROUP_BY"),
        ("supplier", "GROUP_BY"),
    }
    assert report["columns"]["total_count"] == []  # COUNT(*) reads no column


def test_an_avro_field_read_through_from_avro_is_that_field_of_the_topic(topic):
    report = lineage.observe(ingested(topic), source=f"kafka:{SETTINGS.orders_topic}")
    price = [entry for entry in report["columns"]["price"] if entry["type"] == "DIRECT"]
    assert [(entry["source"], entry["field"], entry["subtype"]) for entry in price] == [
        (f"kafka:{SETTINGS.orders_topic}", "value.price", "TRANSFORMATION")
    ]


def test_a_group_by_key_taken_from_another_column_is_named_with_both_derivations(table):
    def by_item(orders):
        return orders.groupBy(
            F.col("item").alias("supplier"),
            F.to_date("bid_time").alias("bid_date"),
            F.hour("bid_time").alias("bid_hour"),
        ).agg(F.sum("price").cast("decimal(10,2)").alias("total_price"), F.count(F.lit(1)).alias("total_count"))

    found = gaps(SUPPLIER_STATS, daily(table, by_item), source=ORDERS_TABLE)
    assert (
        "column lineage of lakehouse/supplier_stats.supplier from lakehouse/orders.item: the catalog says nothing "
        "(an extra source), Spark ran DIRECT/IDENTITY (Spark's plan: no function), INDIRECT/GROUP_BY"
    ) in found
    assert (
        "column lineage of lakehouse/supplier_stats.supplier from lakehouse/orders.supplier: the catalog says "
        "DIRECT/IDENTITY (copied unchanged), INDIRECT/GROUP_BY, Spark ran nothing (a missing source)"
    ) in found
    assert {gap.split(":")[0].split(" from ")[0] for gap in found} == {
        f"column lineage of lakehouse/supplier_stats.{column}"
        for column in ("supplier", "bid_date", "bid_hour", "total_price", "total_count")
    }


def test_an_aggregate_over_another_column_is_named_with_both_derivations(topic):
    def counted_as_total(valid):
        return (
            valid.withWatermark("bid_time", "5 seconds")
            .groupBy(F.window("bid_time", "5 seconds"), "supplier")
            .agg(F.count(F.lit(1)).alias("count"), F.sum(F.length("item")).alias("total_price"))
            .select(
                F.col("window.start").alias("window_start"),
                F.col("window.end").alias("window_end"),
                "supplier",
                F.col("total_price").cast("decimal(12,2)").alias("total_price"),
                "count",
            )
        )

    found = gaps(SUPPLIER_STATS_LIVE, live(topic, counted_as_total), expand="value")
    assert found == [
        "column lineage of supplier_stats_live.total_price from orders.item: the catalog says INDIRECT/CONDITIONAL, "
        "INDIRECT/FILTER, Spark ran DIRECT/AGGREGATION (Spark's plan: Cast, Length, Sum), INDIRECT/FILTER",
        "column lineage of supplier_stats_live.total_price from orders.price: the catalog says DIRECT/AGGREGATION "
        "(SUM(CAST(price AS DECIMAL(10,2)))), INDIRECT/FILTER, Spark ran INDIRECT/CONDITIONAL, INDIRECT/FILTER",
    ]


def test_a_cast_removed_is_named_with_both_derivations(topic):
    def uncast(valid):
        return valid.select("order_id", "item", "price", "supplier", "bid_time")

    assert gaps(LAKEHOUSE_ORDERS, ingested(topic, uncast)) == [
        "column lineage of lakehouse/orders.bid_time from orders.bid_time: the catalog says DIRECT/TRANSFORMATION "
        "(timestamp-millis to TIMESTAMP_NTZ (UTC)), INDIRECT/FILTER, Spark ran DIRECT/IDENTITY (Spark's plan: no "
        "function), INDIRECT/FILTER"
    ]


def test_a_source_that_is_no_asset_is_a_clear_error(spark):
    other = spark.createDataFrame([("a",)], "supplier string")
    with pytest.raises(
        observed.ObservationError, match="input table:lakehouse.default.suppliers is no dataset of the catalog"
    ):
        observed.from_report(
            lineage.observe(other, source="table:lakehouse.default.suppliers"), SUPPLIER_STATS, SETTINGS
        )


def test_a_value_changed_under_a_condition_is_named_with_what_spark_ran(topic):
    """A column whose inputs stay the same but whose computation changes (one supplier's prices
    doubled): the functions Spark's plan applies are not the catalog's."""

    def doubled_for_alice(valid):
        rows = transforms.iceberg_orders(valid)
        doubled = F.when(F.col("supplier") == "Alice", F.col("price") * 2).otherwise(F.col("price"))
        return rows.withColumn("price", doubled.cast(rows.schema["price"].dataType))

    assert gaps(LAKEHOUSE_ORDERS, ingested(topic, doubled_for_alice)) == [
        "column lineage of lakehouse/orders.price from orders.price: the catalog says DIRECT/TRANSFORMATION "
        "(CAST(price AS DECIMAL(10,2))), INDIRECT/FILTER, Spark ran DIRECT/TRANSFORMATION (Spark's plan: CaseWhen, "
        "Cast, Multiply), INDIRECT/FILTER"
    ]


def test_a_value_chosen_under_a_condition_is_no_copy(topic):
    def hidden_for_alice(valid):
        rows = transforms.iceberg_orders(valid)
        return rows.withColumn("item", F.when(F.col("supplier") == "Alice", F.lit("?")).otherwise(F.col("item")))

    assert gaps(LAKEHOUSE_ORDERS, ingested(topic, hidden_for_alice)) == [
        "column lineage of lakehouse/orders.item from orders.item: the catalog says DIRECT/IDENTITY (copied "
        "unchanged), INDIRECT/FILTER, Spark ran DIRECT/IDENTITY (Spark's plan: CaseWhen), INDIRECT/FILTER"
    ]

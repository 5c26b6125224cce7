"""The everyday edits a reviewer must see, run through the real assets on the test stack: each is a gap
in the event log, in Marquez and in the asset's `lineage_matches_catalog` check, naming both
derivations, and the real job run again restores a clean check everywhere.

`supplier_stats` with four edits at once: a literal (`count(1)` -> `count(0)`), an aggregate's flag
(`sum` -> `sum(DISTINCT)`), a predicate (the day as `between`), an input the catalog does not know (a
table of discounts, joined); and the archive without a column, on a pipeline of its own (its files
stay where other tests read the archive)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import dagster as dg
import pytest

from lineage_assets.datasets import ARCHIVE, SUPPLIER_STATS, iceberg_table_name
from lineage_assets.generator import GeneratorConfig, generate_orders, produce_orders
from lineage_assets.lineage.check import check, check_marquez
from lineage_assets.lineage.emitter import emitter_for
from lineage_assets.resources.kafka import KafkaResource
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.testing import pipeline_of_its_own
from tests.e2e.conftest import DELIVERY_TIMEOUT_S, lineage_check_of, materialize
from tests.suite import SHARED_PIPELINE

pytestmark = pytest.mark.xdist_group(SHARED_PIPELINE)  # the test stack's own topics, tables and lineage

REVIEWED_BADLY = """
from pyspark.sql import functions as F

from spark import supplier_stats


def written(source, day):
    discounts = source.sparkSession.table({discounts!r})
    orders = source.where(F.to_date("bid_time").between(F.lit(day), F.lit(day))).join(discounts, "supplier", "left")
    price = (F.col("price") * (1 - F.coalesce("discount", F.lit(0)))).cast("decimal(10,2)")
    return (
        orders.withColumn("price", price)
        .groupBy("supplier", F.to_date("bid_time").alias("bid_date"), F.hour("bid_time").alias("bid_hour"))
        .agg(F.sum_distinct("price").alias("total_price"), F.count(F.lit(0)).alias("total_count"))
        .select(
            "supplier",
            "bid_date",
            "bid_hour",
            F.col("total_price").cast("decimal(10,2)").alias("total_price"),
            F.col("total_count").cast("long").alias("total_count"),
        )
    )


supplier_stats.written = written
supplier_stats.main()
"""
WITHOUT_ITEM = """
from spark import archive_orders

written = archive_orders.written
archive_orders.written = lambda decoded: written(decoded).drop("item")
archive_orders.main()
"""


def gaps_of(evaluation: dg.AssetCheckEvaluation) -> str:
    return evaluation.metadata["gaps"].value


def test_a_literal_a_flag_a_predicate_and_an_undeclared_input_are_gaps_everywhere_until_the_real_job_runs(
    runs, marquez, settings, instance, spark, tmp_path
):
    events = emitter_for(settings)
    assert check(events.events(), settings) == []  # the real jobs ran as designed
    discounts = iceberg_table_name(settings, "discounts")
    spark.sql(f"CREATE TABLE IF NOT EXISTS {discounts} (supplier string, discount decimal(3,2)) USING iceberg")
    spark.sql(f"INSERT OVERWRITE {discounts} VALUES ('Alice', 0.10)")
    script = tmp_path / "reviewed_badly.py"
    script.write_text(REVIEWED_BADLY.format(discounts=discounts))

    changed = materialize(settings, instance, SUPPLIER_STATS, str(script))
    # Blocking: supplier_revenue is computed from supplier_stats, and must not build on what nobody reviewed.
    assert not changed.success
    evaluation = lineage_check_of(changed)
    assert not evaluation.passed
    said = gaps_of(evaluation)
    designed = SUPPLIER_STATS.designed
    assert designed is not None
    for expected in (
        "reads table:lakehouse.",  # the input, as the plan names it
        f"the catalog says {designed.columns['total_price']}, Spark ran cast(sum(distinct ",
        "the catalog says cast(count(1) as bigint), Spark ran cast(count(0) as bigint)",
        ">= :day) AND (to_date(lakehouse/orders.bid_time, None, Some(UTC), true) <= :day)",
    ):
        assert expected in said, said

    gaps = check(events.events(), settings)
    stats = f"{settings.lineage_namespace}/{SUPPLIER_STATS.job.lineage_name}"
    assert any(gap.startswith(f"extra edge: job {stats} reads s3://") and "discounts" in gap for gap in gaps), gaps
    total = "column lineage of lakehouse/supplier_stats.total_price from lakehouse/orders.price: the catalog says"
    assert any(gap.startswith(total) and "sum(distinct " in gap for gap in gaps), gaps
    assert any("total_count: the catalog says cast(count(1) as bigint), Spark ran cast(count(0)" in g for g in gaps)
    assert any(" <= :day)" in gap and "INDIRECT/FILTER" in gap for gap in gaps), gaps

    assert events.flush(timeout=DELIVERY_TIMEOUT_S)
    shown = check_marquez(marquez, settings)
    assert any("discounts" in gap for gap in shown), shown  # Marquez shows the graph that ran
    assert any(gap.startswith("column lineage of lakehouse/supplier_stats.total_price") for gap in shown), shown

    restored = materialize(settings, instance, SUPPLIER_STATS)
    assert lineage_check_of(restored).passed
    assert check(events.events(), settings) == []
    assert events.flush(timeout=DELIVERY_TIMEOUT_S)
    assert not [gap for gap in check_marquez(marquez, settings) if "discounts" in gap or gap.startswith("column")]


def test_a_dropped_column_is_a_gap_with_the_schema_written_until_the_real_job_runs(stack, settings, instance, marquez):
    own = pipeline_of_its_own(settings, "dropped-column")
    orders = list(generate_orders(GeneratorConfig(count=20, seed=53, start=dt.datetime(2026, 11, 24, tzinfo=dt.UTC))))
    KafkaResource(environment=SettingsResource.of(own)).ensure_topics(own.orders_topic)
    produce_orders(orders, own)
    script = Path(own.state_dir) / "without_item.py"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(WITHOUT_ITEM)

    changed = materialize(own, instance, ARCHIVE, str(script))
    evaluation = lineage_check_of(changed)
    assert not evaluation.passed
    assert "orders_archive.item: the catalog says orders.item, Spark ran no such column" in gaps_of(evaluation)
    events = emitter_for(own)
    *_, complete = [
        e for e in events.events() if e["eventType"] == "COMPLETE" and e["job"]["name"] == ARCHIVE.job.lineage_name
    ]
    written = [field["name"] for field in complete["outputs"][0]["facets"]["schema"]["fields"]]
    assert "item" not in written and "supplier" in written  # the schema written, not the catalog's

    def archive_gaps(gaps: list[str]) -> list[str]:
        return [gap for gap in gaps if gap.startswith("column lineage of orders_archive.item")]

    assert archive_gaps(check(events.events(), own))
    assert events.flush(timeout=DELIVERY_TIMEOUT_S)
    assert archive_gaps(check_marquez(marquez, own))
    newest = next(marquez.dataset_versions(*ARCHIVE.identity(own).node, page=1))
    assert "item" not in {field["name"] for field in newest["fields"]}  # Marquez shows the columns written

    restored = materialize(own, instance, ARCHIVE)
    assert lineage_check_of(restored).passed
    assert not archive_gaps(check(events.events(), own))
    assert events.flush(timeout=DELIVERY_TIMEOUT_S)
    assert not archive_gaps(check_marquez(marquez, own))

"""The whole pipeline on the local stack, checked against an independent computation.

Orders come from the seeded generator; the expected archive, tables and window totals are computed
here in plain Python from the same generated records, never from the pipeline's own output.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections import Counter, defaultdict
from decimal import Decimal

import dagster as dg
import pytest
from confluent_kafka import Consumer

from lineage_assets.assets.common import asset_key
from lineage_assets.datasets import LAKEHOUSE_ORDERS, iceberg_table_name
from lineage_assets.generator import BAD_KINDS, generate_orders
from lineage_assets.job_specs import PROGRESS_PREFIX
from lineage_assets.spark_conf import committed_table
from tests.e2e.conftest import GENERATOR
from tests.suite import SHARED_PIPELINE

pytestmark = pytest.mark.xdist_group(SHARED_PIPELINE)  # the test stack's own topics, tables and lineage

GENERATED = list(generate_orders(GENERATOR))
VALID = [o for o in GENERATED if o.kind not in BAD_KINDS]
WINDOW = dt.timedelta(seconds=5)
WATERMARK_DELAY = dt.timedelta(seconds=5)


def consume_all(settings, topic: str) -> list:
    consumer = Consumer(
        {
            "bootstrap.servers": settings.kafka_servers,
            "group.id": f"e2e-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    records, idle = [], 0
    try:
        while idle < 5:
            message = consumer.poll(1.0)
            if message is None:
                idle += 1
            elif not message.error():
                records.append(message)
    finally:
        consumer.close()
    return records


def test_generator_made_what_the_test_needs():
    kinds = Counter(o.kind for o in GENERATED)
    assert kinds["late"] > 0 and sum(kinds[k] for k in kinds if k not in ("valid", "late")) > 0
    assert {o.order["bid_time"].date() for o in VALID} == {dt.date(2026, 11, 20), dt.date(2026, 11, 21)}


def test_archive_holds_every_record_exactly_once_with_its_bytes(runs, settings, spark):
    archived = spark.read.json(f"s3://{settings.archive_bucket}/{settings.archive_prefix}").collect()
    assert len(archived) == len(GENERATED)
    assert Counter(row.key for row in archived) == Counter(o.key for o in GENERATED)
    assert len({(row.partition, row.offset) for row in archived}) == len(GENERATED)
    not_avro = {o.key: o.raw_value for o in GENERATED if o.kind == "not-avro"}
    for row in archived:
        if row.key in not_avro:
            assert base64.b64decode(row.value_base64) == not_avro[row.key]
            assert row.dead_letter_reason is not None


def test_lakehouse_orders_holds_each_valid_order_with_its_decimal_price(runs, settings, spark):
    rows = committed_table(spark, iceberg_table_name(settings, "orders")).collect()
    assert len(rows) == len(VALID)
    expected = {
        o.key: (Decimal(o.order["price"]), o.order["supplier"], o.order["bid_time"].replace(tzinfo=None)) for o in VALID
    }
    assert {row.order_id: (row.price, row.supplier, row.bid_time) for row in rows} == expected


def test_invalid_records_are_dead_lettered_and_counted(runs, settings, instance):
    first, _ = runs
    bad = [o for o in GENERATED if o.kind in BAD_KINDS]
    assert first.dead_letters == len(bad)
    # The ingestion read each record once, though it reads a batch again for its dead letters.
    streaming_run = first.run_ids[1]
    (ingested,) = [
        record.event_log_entry.asset_materialization
        for record in instance.get_records_for_run(
            streaming_run, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION
        ).records
        if record.event_log_entry.asset_materialization.asset_key == asset_key(LAKEHOUSE_ORDERS)
    ]
    assert (ingested.metadata["rows_in"].value, ingested.metadata["rows_out"].value) == (len(GENERATED), len(VALID))
    letters = consume_all(settings, settings.dead_letter_topic)
    assert sorted(m.key().decode() for m in letters) == sorted(o.key for o in bad)
    reasons = {m.key().decode(): json.loads(m.value())["reason"] for m in letters}
    for order in bad:
        expected_start = {
            "not-avro": "not Confluent-framed Avro",
            "missing-field": "missing field: supplier",
            "price-out-of-range": "price '123456789.00'",
            "price-not-a-number": "price 'twelve'",
        }[order.kind]
        assert reasons[order.key].startswith(expected_start)


def expected_hourly_stats() -> dict:
    stats = defaultdict(lambda: [Decimal("0"), 0])
    for order in VALID:
        bid = order.order["bid_time"]
        cell = stats[(order.order["supplier"], bid.date(), bid.hour)]
        cell[0] += Decimal(order.order["price"])
        cell[1] += 1
    return {key: tuple(value) for key, value in stats.items()}


def test_supplier_stats_totals_equal_the_expected_to_the_cent(runs, settings, spark):
    first, _ = runs
    assert sorted(first.days) == ["2026-11-20", "2026-11-21"]
    rows = committed_table(spark, iceberg_table_name(settings, "supplier_stats")).collect()
    got = {(r.supplier, r.bid_date, r.bid_hour): (r.total_price, r.total_count) for r in rows}
    assert got == expected_hourly_stats()


def test_live_window_totals_equal_the_expected_for_closed_windows(runs, settings):
    def window_start(t: dt.datetime) -> dt.datetime:
        return t - dt.timedelta(seconds=t.second % 5, microseconds=t.microsecond)

    watermark = max(o.order["bid_time"] for o in VALID) - WATERMARK_DELAY
    expected = defaultdict(lambda: [Decimal("0"), 0])
    for order in VALID:  # one catch-up batch: every valid record is counted, late ones too
        start = window_start(order.order["bid_time"])
        if start + WINDOW <= watermark:
            cell = expected[(start, order.order["supplier"])]
            cell[0] += Decimal(order.order["price"])
            cell[1] += 1
    published = [json.loads(m.value()) for m in consume_all(settings, settings.supplier_stats_topic)]
    got = {
        (dt.datetime.fromisoformat(w["window_start"]), w["supplier"]): (Decimal(str(w["total_price"])), w["count"])
        for w in published
    }
    assert len(got) == len(published)  # each window published once
    assert got == {key: tuple(value) for key, value in expected.items()}


def test_materializing_again_without_new_orders_changes_nothing(runs, settings, spark):
    first, second = runs
    assert second.rows["orders_archive"] == 0 and second.rows["lakehouse/orders"] == 0
    assert second.rows["supplier_stats_live"] == 0 and second.dead_letters == 0
    assert second.supplier_totals == {}  # no day touched, no supplier_stats run
    assert committed_table(spark, iceberg_table_name(settings, "orders")).count() == len(VALID)


def test_asset_checks_pass(runs):
    first, second = runs
    assert first.checks == {
        "archive_reconciles_with_topic": True,
        "orders_reconcile_with_topic": True,
        "orders_values_in_range": True,
        "orders_schema_readable": True,
        # What each Spark job's plan computed is the designed lineage.
        "lineage_matches_catalog of orders_archive": True,
        "lineage_matches_catalog of supplier_stats_live": True,
        "lineage_matches_catalog of lakehouse/orders": True,
        "lineage_matches_catalog of lakehouse/supplier_stats": True,
        "lineage_matches_catalog of lakehouse/suppliers": True,
        "lineage_matches_catalog of lakehouse/supplier_revenue": True,
        # supplier_revenue's declared checks: its revenue adds up, every supplier is in the dimension.
        "revenue_reconciles_with_supplier_stats": True,
        "region_and_tier_present": True,
    }
    assert all(second.checks.values())


def test_no_spark_job_of_the_pipeline_logs_an_error(runs, instance):
    # A driver's ERROR lines (Spark's, the agent's, the listener's) are relayed into its run's log.
    messages = [entry.user_message for run in runs for run_id in run.run_ids for entry in instance.all_logs(run_id)]
    assert any(message.startswith(PROGRESS_PREFIX) for message in messages)  # the drivers' lines are relayed
    assert [message for message in messages if " ERROR " in message] == []

"""The supplier dimension's rules: its generator, its records' decoding and latest state, the revenue
join and rank, and which of the dimension's snapshots a day's revenue reads."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pytest
from pyspark.sql import Row

from lineage_assets.datasets import SUPPLIERS_AVRO_SCHEMA
from lineage_assets.generator import SUPPLIERS, SuppliersConfig, generate_suppliers
from lineage_assets.source_schemas import WriterVersion, judge
from spark import transforms
from spark.table_job import CURRENT, DAY_END, FIRST, snapshot_as_of_day
from tests.unit.conftest import confluent_avro
from tests.unit.test_transforms import kafka_rows

UTC = dt.UTC
START = dt.datetime(2026, 11, 20, 23, 56, tzinfo=UTC)


def test_the_generator_states_every_supplier_then_changes_a_region_or_tier_within_the_span():
    config = SuppliersConfig(seed=3, start=START, span_seconds=400, changes=5, bad=1)
    records = generate_suppliers(config)
    assert records == generate_suppliers(config)  # deterministic under its seed
    first = records[: len(SUPPLIERS)]
    assert sorted(r.supplier for r in first) == sorted(SUPPLIERS) and {r.updated_at for r in first} == {
        START - dt.timedelta(seconds=1)
    }
    later = records[len(SUPPLIERS) :]
    assert len(later) == 6 and all(START <= r.updated_at <= START + dt.timedelta(seconds=400) for r in later)
    assert [r.updated_at for r in later] == sorted(r.updated_at for r in later)
    assert sum(r.region is None for r in later) == 1  # the bad record
    state = {r.supplier: (r.region, r.tier) for r in first}
    for change in (r for r in later if r.region is not None):
        before = state[change.supplier]
        assert (change.region, change.tier) != before  # each change changes something
        assert (change.region == before[0]) != (change.tier == before[1])  # one thing at a time
        state[change.supplier] = (change.region, change.tier)


def supplier(name: str, region: str | None, tier: str, at: dt.datetime) -> dict:
    return {"supplier": name, "region": region, "tier": tier, "updated_at": at}


def decode(spark, values: list[bytes]):
    schema = json.dumps(SUPPLIERS_AVRO_SCHEMA)
    versions = {1: WriterVersion("suppliers-value", 1, 1, schema, judge(SUPPLIERS_AVRO_SCHEMA, SUPPLIERS_AVRO_SCHEMA))}
    return transforms.SupplierDecoder(schema, versions)(kafka_rows(spark, values))


def test_each_suppliers_latest_valid_record_is_its_state_and_a_bad_one_is_a_dead_letter(spark):
    t = dt.datetime(2026, 11, 21, 8, 0, tzinfo=UTC)
    later = t + dt.timedelta(hours=1)
    decoded = decode(
        spark,
        [
            confluent_avro(SUPPLIERS_AVRO_SCHEMA, supplier("Alice", "EMEA", "gold", t), 1),
            confluent_avro(SUPPLIERS_AVRO_SCHEMA, supplier("Bob", "AMER", "bronze", t), 1),
            confluent_avro(SUPPLIERS_AVRO_SCHEMA, supplier("Alice", "APAC", "gold", later), 1),
            # Read after the change but older: the change stands.
            confluent_avro(SUPPLIERS_AVRO_SCHEMA, supplier("Bob", "EMEA", "bronze", t - dt.timedelta(hours=1)), 1),
            confluent_avro(SUPPLIERS_AVRO_SCHEMA, supplier("Carol", None, "silver", later), 1),
            b"\x00\x00\x00\x00\x09not a supplier",
        ],
    )
    reasons = [r.dead_letter_reason for r in decoded.orderBy("offset").collect()]
    assert reasons[:4] == [None] * 4
    assert reasons[4] == "missing field: region"
    assert reasons[5] == "unexpected schema id 9"
    state = transforms.current_suppliers(transforms.valid_records(decoded)).orderBy("supplier").collect()
    assert [(r.supplier, r.region, r.tier, r.updated_at) for r in state] == [
        ("Alice", "APAC", "gold", later.replace(tzinfo=None)),
        ("Bob", "AMER", "bronze", t.replace(tzinfo=None)),
    ]


def test_a_days_revenue_joins_each_supplier_to_the_dimension_and_ranks_it_within_its_region(spark):
    day = dt.date(2026, 11, 21)
    stats = spark.createDataFrame(
        [
            Row(supplier=s, bid_date=d, bid_hour=h, total_price=Decimal(p), total_count=c)
            for s, d, h, p, c in [
                ("Alice", day, 1, "10.00", 1),
                ("Alice", day, 2, "30.00", 2),
                ("Bob", day, 1, "25.00", 1),
                ("Carol", day, 3, "50.00", 4),
                ("Dave", day, 3, "5.00", 1),  # not in the dimension
                ("Bob", day - dt.timedelta(days=1), 23, "999.00", 9),  # another day
            ]
        ],
        "supplier string, bid_date date, bid_hour int, total_price decimal(10,2), total_count bigint",
    )
    suppliers = spark.createDataFrame(
        [("Alice", "EMEA", "gold"), ("Bob", "EMEA", "silver"), ("Carol", "AMER", "bronze")],
        "supplier string, region string, tier string",
    )
    rows = transforms.supplier_revenue(stats, suppliers, day).orderBy("supplier").collect()
    assert [(r.supplier, r.region, r.tier, r.revenue, r.orders, r.region_rank) for r in rows] == [
        ("Alice", "EMEA", "gold", Decimal("40.00"), 3, 1),
        ("Bob", "EMEA", "silver", Decimal("25.00"), 1, 2),
        ("Carol", "AMER", "bronze", Decimal("50.00"), 4, 1),
        ("Dave", None, None, Decimal("5.00"), 1, 1),  # kept: revenue is never lost to the join
    ]
    assert {r.bid_date for r in rows} == {day}


DAY = dt.date(2026, 11, 21)
DAY_ENDS = dt.datetime(2026, 11, 22, tzinfo=UTC)


def ms(at: dt.datetime) -> int:
    return int(at.timestamp() * 1000)


@pytest.mark.parametrize(
    ("history", "now", "expected"),
    [
        # The snapshot current when the day ended, not one made after it.
        (
            [(ms(DAY_ENDS - dt.timedelta(hours=5)), 1), (ms(DAY_ENDS + dt.timedelta(hours=1)), 2)],
            DAY_ENDS + dt.timedelta(days=3),
            (1, DAY_END),
        ),
        # A day not over: the current one.
        (
            [(ms(DAY_ENDS - dt.timedelta(hours=5)), 1), (ms(DAY_ENDS - dt.timedelta(hours=1)), 2)],
            DAY_ENDS - dt.timedelta(minutes=1),
            (2, CURRENT),
        ),
        # A day before the table's first snapshot: that first one.
        (
            [(ms(DAY_ENDS + dt.timedelta(hours=5)), 7), (ms(DAY_ENDS + dt.timedelta(hours=6)), 8)],
            DAY_ENDS + dt.timedelta(days=1),
            (7, FIRST),
        ),
        ([], DAY_ENDS, (None, CURRENT)),
    ],
)
def test_a_day_reads_the_dimension_as_it_stood_when_the_day_ended(history, now, expected):
    assert snapshot_as_of_day(history, DAY, now) == expected

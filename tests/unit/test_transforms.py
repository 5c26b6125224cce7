"""The pipeline's transformation rules, on small in-memory DataFrames."""

from __future__ import annotations

import base64
import copy
import datetime as dt
import json
from decimal import Decimal

import pytest
from pyspark.sql import types as T

from lineage_assets.datasets import ORDERS_AVRO_SCHEMA, with_aliases
from lineage_assets.demo import DRIFTED_ORDERS_SCHEMA
from lineage_assets.source_schemas import WriterVersion, judge
from spark import transforms
from tests.unit.conftest import confluent_avro

SCHEMA_ID = 3
UTC = dt.UTC
KAFKA_SCHEMA = T.StructType(
    [
        T.StructField("key", T.BinaryType()),
        T.StructField("value", T.BinaryType()),
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("offset", T.LongType()),
        T.StructField("timestamp", T.TimestampType()),
    ]
)


def order(price="12.50", supplier="Alice", bid_time=dt.datetime(2026, 11, 20, 23, 59, 58, tzinfo=UTC), **changes):
    return {
        "order_id": "o-1",
        "bid_time": bid_time,
        "price": price,
        "item": "Desk Lamp",
        "supplier": supplier,
        **changes,
    }


def kafka_rows(spark, values: list[bytes]):
    now = dt.datetime(2026, 11, 21, 0, 0, tzinfo=UTC)
    rows = [(f"k{i}".encode(), value, "orders", 0, i, now) for i, value in enumerate(values)]
    return spark.createDataFrame(rows, KAFKA_SCHEMA)


def registered(schema: dict, schema_id: int = SCHEMA_ID, version: int = 1) -> WriterVersion:
    return WriterVersion("orders-value", version, schema_id, json.dumps(schema), judge(ORDERS_AVRO_SCHEMA, schema))


def decode(spark, values, versions=None, reader=ORDERS_AVRO_SCHEMA):
    versions = {SCHEMA_ID: registered(ORDERS_AVRO_SCHEMA)} if versions is None else versions
    return transforms.decode_orders(kafka_rows(spark, values), json.dumps(reader), versions)


def test_each_readable_writer_version_is_decoded_into_the_reader_schema(spark):
    added = copy.deepcopy(ORDERS_AVRO_SCHEMA)
    added["fields"].append({"name": "currency", "type": ["null", "string"], "default": None})
    versions = {SCHEMA_ID: registered(ORDERS_AVRO_SCHEMA), 5: registered(added, 5, 2)}
    rows = (
        decode(
            spark,
            [
                confluent_avro(ORDERS_AVRO_SCHEMA, order(), SCHEMA_ID),
                confluent_avro(added, order(supplier="Bob", currency="EUR"), 5),
            ],
            versions,
        )
        .orderBy("offset")
        .collect()
    )
    assert [(r.dead_letter_reason, r.supplier, r.schema_id, r.schema_version) for r in rows] == [
        (None, "Alice", SCHEMA_ID, 1),
        (None, "Bob", 5, 2),
    ]
    assert "currency" not in rows[1].asDict()  # the reader's columns only


def test_an_unreadable_version_is_dead_lettered_with_its_version_never_decoded(spark):
    versions = {SCHEMA_ID: registered(ORDERS_AVRO_SCHEMA), 6: registered(DRIFTED_ORDERS_SCHEMA, 6, 2)}
    decoded = decode(spark, [confluent_avro(DRIFTED_ORDERS_SCHEMA, order(supplier=None, vendor="Bob"), 6)], versions)
    row = decoded.collect()[0]
    assert (
        row.dead_letter_reason
        == "schema_incompatible: orders-value version 2 (id 6): field supplier is missing (removed or renamed)"
    )
    assert (row.schema_id, row.schema_version, row.supplier, row.price) == (6, 2, None, None)
    payload = json.loads(transforms.dead_letter_records(decoded, "iceberg-ingestion").collect()[0].value)
    assert (payload["schema_id"], payload["schema_version"]) == (6, 2)
    # One line of strict base64 (no 76-character MIME lines), so the replay gets the bytes back.
    assert base64.b64decode(payload["value_base64"], validate=True) == row.value
    assert payload["reason"].startswith("schema_incompatible")


def test_a_reader_taught_the_rename_reads_the_version(spark):
    taught = with_aliases(ORDERS_AVRO_SCHEMA, supplier=("vendor",))
    version = WriterVersion(
        "orders-value", 2, 6, json.dumps(DRIFTED_ORDERS_SCHEMA), judge(taught, DRIFTED_ORDERS_SCHEMA)
    )
    row = decode(
        spark,
        [confluent_avro(DRIFTED_ORDERS_SCHEMA, order(supplier=None, vendor="Bob"), 6)],
        {6: version},
        reader=taught,
    ).collect()[0]
    assert (row.dead_letter_reason, row.supplier, row.price) == (None, "Bob", Decimal("12.50"))


def test_replayed_records_are_recognised_by_their_header(spark):
    frame = spark.createDataFrame(
        [([("lineage-assets.replay-of", b"orders-dlq/0/7")],), ([("other", b"x")],), (None,)],
        "headers array<struct<key:string,value:binary>>",
    )
    flags = [
        row.replayed
        for row in frame.select(
            transforms.has_header("headers", "lineage-assets.replay-of").alias("replayed")
        ).collect()
    ]
    assert flags == [True, False, False]


def test_valid_record_is_decoded_with_price_as_decimal(spark):
    row = decode(spark, [confluent_avro(ORDERS_AVRO_SCHEMA, order(), SCHEMA_ID)]).collect()[0]
    assert row.dead_letter_reason is None
    assert (row.order_id, row.price, row.supplier) == ("o-1", Decimal("12.50"), "Alice")
    assert row.bid_time == dt.datetime(2026, 11, 20, 23, 59, 58)  # session time zone is UTC


@pytest.mark.parametrize(
    "text, expected", [("12.345", "12.35"), ("12.344", "12.34"), ("0.005", "0.01"), ("99999999.99", "99999999.99")]
)
def test_price_is_rounded_half_up_to_two_decimals(spark, text, expected):
    row = decode(spark, [confluent_avro(ORDERS_AVRO_SCHEMA, order(price=text), SCHEMA_ID)]).collect()[0]
    assert row.dead_letter_reason is None and row.price == Decimal(expected)


def test_bad_records_are_routed_to_dead_letters_with_a_reason(spark):
    good = confluent_avro(ORDERS_AVRO_SCHEMA, order(), SCHEMA_ID)
    values = [
        good,
        b"plain text, no framing",
        b"\x00\x00\x00\x00\x03\xff\xff\xff",  # framed, but the body is not Avro
        confluent_avro(ORDERS_AVRO_SCHEMA, order(), 99),  # another schema
        confluent_avro(ORDERS_AVRO_SCHEMA, order(supplier=None), SCHEMA_ID),
        confluent_avro(ORDERS_AVRO_SCHEMA, order(price="123456789.00"), SCHEMA_ID),
        confluent_avro(ORDERS_AVRO_SCHEMA, order(price="twelve"), SCHEMA_ID),
    ]
    decoded = decode(spark, values)
    reasons = [row.dead_letter_reason for row in decoded.orderBy("offset").collect()]
    assert reasons[0] is None
    assert reasons[1].startswith("not Confluent-framed Avro")
    assert reasons[2] == "value is not valid Avro for the registered schema"
    assert reasons[3] == "unexpected schema id 99"  # not a version of the subject
    assert reasons[4] == "missing field: supplier"
    assert reasons[5] == "price '123456789.00' is not a DECIMAL(10,2)"
    assert reasons[6] == "price 'twelve' is not a DECIMAL(10,2)"
    assert transforms.valid_records(decoded).count() == 1
    assert transforms.dead_letters(decoded).count() == 6

    record = (
        transforms.dead_letter_records(transforms.dead_letters(decoded), "iceberg-ingestion")
        .orderBy("key")
        .collect()[0]
    )
    payload = json.loads(record.value)
    assert record.key == "k1" and payload["job"] == "iceberg-ingestion" and payload["offset"] == 1
    assert payload["value_base64"] == "cGxhaW4gdGV4dCwgbm8gZnJhbWluZw=="  # the original bytes, unchanged


def test_one_decoder_decodes_each_batch_it_is_given_on_its_own(spark):
    """A continuous ingestion builds its decoder once and applies it to every micro-batch."""
    decoder = transforms.OrderDecoder(json.dumps(ORDERS_AVRO_SCHEMA), {SCHEMA_ID: registered(ORDERS_AVRO_SCHEMA)})
    first = decoder(kafka_rows(spark, [confluent_avro(ORDERS_AVRO_SCHEMA, order(), SCHEMA_ID)])).collect()
    second = (
        decoder(
            kafka_rows(
                spark, [confluent_avro(ORDERS_AVRO_SCHEMA, order(price="7.10", supplier="Bob"), SCHEMA_ID), b"garbage"]
            )
        )
        .orderBy("offset")
        .collect()
    )
    assert [(r.supplier, r.price, r.dead_letter_reason) for r in first] == [("Alice", Decimal("12.50"), None)]
    assert [(r.supplier, r.price) for r in second] == [("Bob", Decimal("7.10")), (None, None)]
    assert second[1].dead_letter_reason.startswith("not Confluent-framed Avro")


def test_archive_keeps_every_record_and_its_bytes(spark):
    values = [confluent_avro(ORDERS_AVRO_SCHEMA, order(), SCHEMA_ID), b"garbage"]
    archived = transforms.archive_records(decode(spark, values)).orderBy("offset").collect()
    assert len(archived) == 2
    assert [(row.date, row.hour) for row in archived] == [("2026-11-21", "00")] * 2
    assert archived[1].value_base64 == "Z2FyYmFnZQ==" and archived[1].dead_letter_reason is not None


def orders_frame(spark, rows):
    schema = T.StructType(
        [
            T.StructField("order_id", T.StringType()),
            T.StructField("supplier", T.StringType()),
            T.StructField("price", T.DecimalType(10, 2)),
            T.StructField("bid_time", T.TimestampNTZType()),
        ]
    )
    return spark.createDataFrame([(f"o{i}", s, Decimal(p), t) for i, (s, p, t) in enumerate(rows)], schema)


def test_hourly_stats_bucket_by_utc_hour_across_midnight(spark):
    rows = [
        ("Alice", "10.00", dt.datetime(2026, 11, 20, 23, 59, 59)),
        ("Alice", "5.25", dt.datetime(2026, 11, 20, 23, 0, 0)),
        ("Alice", "1.10", dt.datetime(2026, 11, 21, 0, 0, 0)),
        ("Bob", "2.00", dt.datetime(2026, 11, 21, 0, 30, 0)),
    ]
    stats = transforms.hourly_supplier_stats(orders_frame(spark, rows))
    got = sorted(tuple(r) for r in stats.collect())
    assert got == [
        ("Alice", dt.date(2026, 11, 20), 23, Decimal("15.25"), 2),
        ("Alice", dt.date(2026, 11, 21), 0, Decimal("1.10"), 1),
        ("Bob", dt.date(2026, 11, 21), 0, Decimal("2.00"), 1),
    ]


def test_day_filter_keeps_only_that_utc_day(spark):
    rows = [
        ("A", "1.00", dt.datetime(2026, 11, 20, 23, 59, 59, 999000)),
        ("A", "2.00", dt.datetime(2026, 11, 21, 0, 0)),
        ("A", "3.00", dt.datetime(2026, 11, 21, 23, 59, 59)),
        ("A", "4.00", dt.datetime(2026, 11, 22, 0, 0)),
    ]
    day = transforms.orders_of_day(orders_frame(spark, rows), dt.date(2026, 11, 21))
    assert sorted(r.price for r in day.collect()) == [Decimal("2.00"), Decimal("3.00")]


def test_empty_input_gives_empty_outputs(spark):
    empty = orders_frame(spark, [])
    assert transforms.hourly_supplier_stats(empty).count() == 0
    assert transforms.orders_of_day(empty, dt.date(2026, 11, 21)).count() == 0
    decoded = decode(spark, [])
    assert transforms.valid_records(decoded).count() == 0 and transforms.dead_letters(decoded).count() == 0


def test_windows_count_records_within_lateness_and_drop_later_ones(spark, tmp_path):
    """Micro-batch by micro-batch, as a stream sees them: the watermark trails the newest bid_time by 5 s."""
    schema = T.StructType(
        [
            T.StructField("supplier", T.StringType()),
            T.StructField("price", T.DecimalType(10, 2)),
            T.StructField("bid_time", T.TimestampType()),
        ]
    )
    source = tmp_path / "in"
    source.mkdir()
    stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(source))
    query = (
        transforms.windowed_supplier_stats(stream)
        .writeStream.outputMode("append")
        .format("memory")
        .queryName("window_probe")
        .start()
    )
    t0 = dt.datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)
    batches = [
        [("Alice", "10.00", 1), ("Alice", "1.00", 7)],  # watermark -> t0+2
        [("Alice", "5.00", 3), ("Alice", "1.00", 13)],  # t0+3 is 4 s late: counted; watermark -> t0+8, [0,5) closes
        [("Alice", "100.00", 4)],  # beyond the lateness: its window is closed, dropped
        [("Bob", "1.00", 30)],  # watermark -> t0+25: closes [5,10) and [10,15)
    ]
    try:
        for n, batch in enumerate(batches):
            lines = [
                json.dumps({"supplier": s, "price": p, "bid_time": (t0 + dt.timedelta(seconds=sec)).isoformat()})
                for s, p, sec in batch
            ]
            (source / f"{n:03}.json").write_text("\n".join(lines))
            query.processAllAvailable()
        got = sorted(
            (r.window_start.second, r.supplier, r.total_price, r["count"])
            for r in spark.table("window_probe").collect()
        )
    finally:
        query.stop()
    assert got == [
        (0, "Alice", Decimal("15.00"), 2),
        (5, "Alice", Decimal("1.00"), 1),
        (10, "Alice", Decimal("1.00"), 1),
    ]

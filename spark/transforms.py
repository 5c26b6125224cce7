"""Pure DataFrame transformations of the pipeline: no Kafka, no files, no Dagster.

Every entry point under ``spark/`` is a thin shell that reads a source, calls these, and writes a
sink, so each rule here is unit-testable on small in-memory DataFrames.

Source records are Kafka rows (``key``, ``value`` binary, ``topic``, ``partition``, ``offset``,
``timestamp``) whose value is Confluent-framed Avro: a zero magic byte, a 4-byte big-endian schema
id, then the Avro body.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro

from spark import lineage

if TYPE_CHECKING:
    from lineage_assets.source_schemas import WriterVersion

PRICE_TYPE = "DECIMAL(10,2)"
REQUIRED_FIELDS = ("order_id", "bid_time", "price", "item", "supplier")
ICEBERG_ORDER_COLUMNS = ("order_id", "item", "price", "supplier", "bid_time")
KAFKA_COLUMNS = ("topic", "partition", "offset", "timestamp")


def decode_orders(
    raw: DataFrame, reader_schema: str, versions: Mapping[int, WriterVersion], keep: tuple[str, ...] = ()
) -> DataFrame:
    """Decode Confluent Avro order values; each row gets ``dead_letter_reason`` (null when valid).

    ``versions`` are the registered writer versions by schema id (``source_schemas``): a record
    written with a readable version is decoded with its writer schema into ``reader_schema`` (Avro
    schema resolution: added fields dropped, aliases followed); a record of an unreadable version
    is not decoded at all and gets the version's ``schema_incompatible`` reason.

    Output columns: the Kafka columns, ``key`` (string), ``value`` (binary, unchanged),
    ``schema_id`` (from the frame) and its ``schema_version``, the order fields with ``price`` cast
    to DECIMAL(10,2) (the source sends it as a string), ``price_text`` (the original),
    ``dead_letter_reason``, and the input columns named in ``keep``.
    """
    return OrderDecoder(reader_schema, versions)(raw, keep)


class RecordDecoder:
    """Confluent-framed Avro values of one reader schema, for one set of writer versions (``versions``,
    by schema id): ``writer_id`` (the frame's id), ``registered`` (the decoded ``record`` struct, its
    ``schema_version`` and ``schema_incompatibility``, which read ``schema_id`` made first) and
    ``reason``, why a record is not valid (null when it is: framed, of a readable version, with a
    value for each of ``required``). Its columns are built once: building them takes hundreds of calls
    into the JVM, 0.15 to 0.2 s, which a micro-batch of a continuous deployment would otherwise pay
    each time."""

    def __init__(
        self, reader_schema: str, versions: Mapping[int, WriterVersion], record: str, required: tuple[str, ...]
    ):
        self.versions = dict(versions)  # what it was built for: a batch plan compares them with the registry's
        framed = F.length("value") >= 5
        magic_ok = framed & (F.substring("value", 1, 1) == F.lit(b"\x00"))
        id_bytes = F.substring("value", 2, 4)

        def written_with(schema_id: int) -> Column:
            # The frame's id bytes compared as bytes: a tenth of the job's time went to parsing them as
            # a number (conv of hex) for every record.
            return magic_ok & (id_bytes == F.lit(schema_id.to_bytes(4, "big", signed=True)))

        writer_id = F.lit(None).cast("long")
        for schema_id in versions:
            writer_id = F.when(written_with(schema_id), F.lit(schema_id).cast("long")).otherwise(writer_id)
        # An id no version has is parsed from the bytes, for the dead letter's reason.
        self.writer_id = F.when(magic_ok, F.coalesce(writer_id, F.conv(F.hex(id_bytes), 16, 10).cast("long")))
        body = F.expr("substring(value, 6, length(value) - 5)")
        reader = json.loads(reader_schema)
        # The columns below read the frame's id from ``schema_id``, made first (``__call__``): each
        # comparison of the frame's bytes copies them out of the record again.
        is_version = {schema_id: F.col("schema_id") == schema_id for schema_id in versions}
        # One decoder per readable version; the first (never true) gives the struct's type when there is none.
        decoders = [F.when(F.lit(False), from_avro(body, reader_schema))] + [
            F.when(
                is_version[schema_id],
                from_avro(
                    body,
                    version.schema,
                    {
                        "mode": "PERMISSIVE",
                        **({} if json.loads(version.schema) == reader else {"avroSchema": reader_schema}),
                    },
                ),
            )
            for schema_id, version in sorted(versions.items())
            if version.readable
        ]
        version_of = F.lit(None).cast("int")
        for schema_id, version in versions.items():
            version_of = F.when(is_version[schema_id], F.lit(version.version)).otherwise(version_of)
        incompatible = F.lit(None).cast("string")
        for schema_id, version in sorted(versions.items()):
            if not version.readable:
                incompatible = F.when(is_version[schema_id], F.lit(version.dead_letter_reason)).otherwise(incompatible)
        # What the registry's versions decide is made in columns of their own, named in lineage by what
        # they are: their expressions change with the versions registered, not with this code.
        self.registered = (
            F.coalesce(*decoders).alias(record),  # a decoded record: named by the bytes it decodes (spark/lineage.py)
            lineage.derived_as(version_of, "schema_version", "registered_version(schema_id)"),
            lineage.derived_as(incompatible, "schema_incompatibility", "incompatibility_of_version(schema_id)"),
        )
        # PERMISSIVE decoding turns a malformed body into a struct of nulls; the reader schema's first
        # field is not nullable, so its absence means the body was not Avro of this schema.
        key_field = reader["fields"][0]["name"]
        malformed = F.col(record).isNull() | F.col(f"{record}.{key_field}").isNull()
        missing = [F.when(F.col(f"{record}.{name}").isNull(), F.lit(name)) for name in required]
        self.reason = (
            F.when(~framed | ~magic_ok, F.lit("not Confluent-framed Avro (missing magic byte 0)"))
            .when(F.col("schema_incompatibility").isNotNull(), F.col("schema_incompatibility"))
            .when(
                F.col("schema_version").isNull(),
                F.concat(F.lit("unexpected schema id "), F.col("schema_id").cast("string")),
            )
            .when(malformed, F.lit("value is not valid Avro for the registered schema"))
            # The names are joined only for a record that lacks one, not for every record.
            .when(
                functools.reduce(Column.__or__, [F.col(f"{record}.{name}").isNull() for name in required]),
                F.concat(F.lit("missing field: "), F.concat_ws(",", *missing)),
            )
        )

    def registered_columns(self, raw: DataFrame) -> DataFrame:
        """``raw`` records with ``schema_id`` and the ``registered`` columns."""
        return raw.select("*", lineage.derived_as(self.writer_id, "schema_id", "schema_id_in_frame(value)")).select(
            "*", *self.registered
        )

    @staticmethod
    def framing_columns() -> tuple[Column | str, ...]:
        """The Kafka columns, ``key`` as text, ``value`` unchanged, ``schema_id`` and ``schema_version``."""
        return (
            *KAFKA_COLUMNS,
            F.col("key").cast("string").alias("key"),
            "value",
            F.col("schema_id").cast("int").alias("schema_id"),
            "schema_version",
        )


class OrderDecoder(RecordDecoder):
    """``decode_orders`` for one reader schema and set of writer versions, applicable to any number of frames."""

    def __init__(self, reader_schema: str, versions: Mapping[int, WriterVersion]):
        super().__init__(reader_schema, versions, "order", REQUIRED_FIELDS)
        # Parsed once, into a column of its own that the reason reads: inlined in both, each parsed it.
        self.price = F.expr(f"try_cast(order.price AS {PRICE_TYPE})")
        price = F.col("price")
        reason = self.reason.when(
            price.isNull(), F.concat(F.lit("price '"), F.col("order.price"), F.lit(f"' is not a {PRICE_TYPE}"))
        )
        self.columns = (
            *self.framing_columns(),
            F.col("order.order_id").alias("order_id"),
            F.col("order.bid_time").alias("bid_time"),
            F.col("order.price").alias("price_text"),
            "price",
            F.col("order.item").alias("item"),
            F.col("order.supplier").alias("supplier"),
            lineage.named_step(reason, "dead_letter_reason"),
        )

    def __call__(self, raw: DataFrame, keep: tuple[str, ...] = ()) -> DataFrame:
        return self.registered_columns(raw).withColumn("price", self.price).select(*self.columns, *keep)


SUPPLIER_FIELDS = ("supplier", "region", "tier", "updated_at")


class SupplierDecoder(RecordDecoder):
    """The supplier dimension's values: the Kafka and frame columns, the supplier fields and
    ``dead_letter_reason`` (null when valid: every field has a value)."""

    def __init__(self, reader_schema: str, versions: Mapping[int, WriterVersion]):
        super().__init__(reader_schema, versions, "dimension", SUPPLIER_FIELDS)
        self.columns = (
            *self.framing_columns(),
            *(F.col(f"dimension.{name}").alias(name) for name in SUPPLIER_FIELDS),
            lineage.named_step(self.reason, "dead_letter_reason"),
        )

    def __call__(self, raw: DataFrame) -> DataFrame:
        return self.registered_columns(raw).select(*self.columns)


def has_header(headers: str, key: str) -> Column:
    """Whether a Kafka record's headers (the source's ``includeHeaders`` column) hold ``key``."""
    # The keys as an array, searched: a lambda (exists) is interpreted for each record, not compiled.
    return F.coalesce(F.array_contains(F.col(headers).getField("key"), key), F.lit(False))


def valid_records(decoded: DataFrame) -> DataFrame:
    return decoded.where(F.col("dead_letter_reason").isNull())


def dead_letters(decoded: DataFrame) -> DataFrame:
    return decoded.where(F.col("dead_letter_reason").isNotNull())


def dead_letter_records(dead: DataFrame, source_job: str) -> DataFrame:
    """Kafka records for the dead-letter topic: original key and bytes, where they came from, and why."""
    return dead.select(
        F.col("key"),
        F.to_json(
            F.struct(
                F.col("dead_letter_reason").alias("reason"),
                F.lit(source_job).alias("job"),
                "topic",
                "partition",
                "offset",
                F.col("timestamp").alias("source_timestamp"),
                F.base64("value").alias("value_base64"),
                "schema_id",
                "schema_version",
            )
        ).alias("value"),
    )


def iceberg_orders(valid: DataFrame) -> DataFrame:
    """Rows of the Iceberg ``orders`` table; ``bid_time`` becomes a zone-less UTC timestamp."""
    return valid.select(
        "order_id",
        "item",
        "price",
        "supplier",
        F.col("bid_time").cast("timestamp_ntz").alias("bid_time"),
    )


def archive_records(decoded: DataFrame) -> DataFrame:
    """Every source record, bytes unchanged, plus its decoded fields, partitioned by Kafka time (UTC)."""
    return decoded.select(
        *KAFKA_COLUMNS,
        "key",
        F.base64("value").alias("value_base64"),
        "schema_id",
        "order_id",
        "bid_time",
        "price_text",
        "item",
        "supplier",
        "dead_letter_reason",
        F.date_format("timestamp", "yyyy-MM-dd").alias("date"),
        F.date_format("timestamp", "HH").alias("hour"),
    )


def windowed_supplier_stats(valid: DataFrame, window_seconds: int = 5, watermark_seconds: int = 5) -> DataFrame:
    """Tumbling event-time windows per supplier: total price and count.

    A record is counted while its window is open: until the watermark (the highest ``bid_time``
    seen, less ``watermark_seconds``) passes the window's end. Later records are dropped, as the
    reference's allowed lateness drops them.
    """
    return (
        valid.withWatermark("bid_time", f"{watermark_seconds} seconds")
        .groupBy(F.window("bid_time", f"{window_seconds} seconds"), "supplier")
        .agg(F.sum("price").alias("total_price"), F.count(F.lit(1)).alias("count"))
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "supplier",
            F.col("total_price").cast("decimal(12,2)").alias("total_price"),
            "count",
        )
    )


def supplier_stats_records(stats: DataFrame) -> DataFrame:
    """Kafka records of window statistics: key = supplier, JSON value with UTC ISO times."""
    iso = "yyyy-MM-dd'T'HH:mm:ss'Z'"
    return stats.select(
        F.col("supplier").alias("key"),
        F.to_json(
            F.struct(
                F.date_format("window_start", iso).alias("window_start"),
                F.date_format("window_end", iso).alias("window_end"),
                "supplier",
                "total_price",
                "count",
            )
        ).alias("value"),
    )


def orders_of_day(orders: DataFrame, day: dt.date) -> DataFrame:
    """Orders whose ``bid_time`` falls on ``day`` (UTC)."""
    return orders.where(F.to_date("bid_time") == F.lit(day))


def hourly_supplier_stats(orders: DataFrame) -> DataFrame:
    """Per supplier, date and hour of ``bid_time``: total price and count (the ``supplier_stats`` table)."""
    return (
        orders.groupBy(
            "supplier",
            F.to_date("bid_time").alias("bid_date"),
            F.hour("bid_time").alias("bid_hour"),
        )
        .agg(F.sum("price").alias("total_price"), F.count(F.lit(1)).alias("total_count"))
        .select(
            "supplier",
            "bid_date",
            "bid_hour",
            F.col("total_price").cast(PRICE_TYPE).alias("total_price"),
            F.col("total_count").cast("long").alias("total_count"),
        )
    )


def current_suppliers(valid: DataFrame) -> DataFrame:
    """Each supplier's latest state among ``valid`` decoded records (the latest ``updated_at``, of two
    at once the later record): the rows a merge into the ``suppliers`` table is given."""
    latest = Window.partitionBy("supplier").orderBy(F.col("updated_at").desc(), F.col("offset").desc())
    return (
        valid.withColumn("change", F.row_number().over(latest))
        .where(F.col("change") == 1)
        .select("supplier", "region", "tier", F.col("updated_at").cast("timestamp_ntz").alias("updated_at"))
    )


REVENUE_TYPE = "DECIMAL(12,2)"


def supplier_revenue(stats: DataFrame, suppliers: DataFrame, day: dt.date) -> DataFrame:
    """Per supplier of ``day`` in ``stats`` (the ``supplier_stats`` table): its revenue and orders, its
    region and tier in ``suppliers`` (null for a supplier the dimension lacks), and its rank by revenue
    within its region (the ``supplier_revenue`` table)."""
    daily = (
        stats.where(F.col("bid_date") == F.lit(day))
        .groupBy("bid_date", "supplier")
        .agg(F.sum("total_price").alias("revenue"), F.sum("total_count").alias("orders"))
    )
    joined = daily.join(suppliers.select("supplier", "region", "tier"), on="supplier", how="left")
    by_revenue = Window.partitionBy("region").orderBy(F.col("revenue").desc(), F.col("supplier"))
    return joined.select(
        "bid_date",
        "supplier",
        "region",
        "tier",
        F.col("revenue").cast(REVENUE_TYPE).alias("revenue"),
        F.col("orders").cast("long").alias("orders"),
        F.rank().over(by_revenue).alias("region_rank"),
    )

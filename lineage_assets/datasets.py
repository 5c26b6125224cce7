"""What each dataset *is*: asset key, OpenLineage namespace and name, symlinks, schema, column lineage.

This is the one place that names datasets. Dagster metadata (column schema and lineage), Spark job
arguments, OpenLineage facets and the lineage check all ask it; a namespace string built anywhere
else is a bug. Names follow the OpenLineage naming spec:

- Kafka topic:    namespace ``kafka://{first bootstrap host}:{port}``, name = topic
- S3 prefix:      namespace ``s3://{bucket}``, name = key prefix
- Iceberg table:  by its physical location, namespace ``s3://{warehouse bucket}``, name =
                  ``{namespace}/{table}`` under the warehouse, with a symlink naming the catalog
                  table (namespace = the REST catalog URI, type TABLE). The openlineage-spark agent
                  names REST-catalog tables the same way, so the asset's dataset and the agent's
                  dataset are one node in the graph.

Each dataset also names the job that produces it (its OpenLineage job name and processing type).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from functools import cache
from typing import Any

from openlineage.client.naming.dataset import S3, Kafka

from lineage_assets.settings import Settings

OWNERS = ("team:data-platform",)  # owners of every dataset and its job (Dagster owners, OpenLineage ownership)

# The OpenLineage job of Dagster runs, the parent of every asset run. One name whatever Dagster job
# ran the assets (the Dagster job's name is a tag of its run): Marquez names a child job
# "{parent job}.{child job}", so a parent named after each Dagster job would split one asset's
# lineage into a job per Dagster job.
ORCHESTRATOR_JOB = "dagster"


class Kind(str, Enum):
    KAFKA = "kafka"
    S3 = "s3"
    ICEBERG = "iceberg"


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    description: str


@dataclass(frozen=True)
class Transformation:
    """An OpenLineage column transformation (type DIRECT or INDIRECT, and its subtype). ``functions``:
    for a DIRECT one, the functions Spark's analyzed plan applies on the way (its expression classes,
    any order); what a job ran is this transformation only if its plan applies exactly these, so a
    ``* 2`` or a CASE WHEN added to a column is a change of its lineage."""

    type: str
    subtype: str
    description: str
    functions: frozenset[str] = frozenset()

    @staticmethod
    def identity() -> Transformation:
        return Transformation("DIRECT", "IDENTITY", "copied unchanged")


@dataclass(frozen=True)
class ColumnSource:
    dataset: str  # a key of DATASETS
    column: str
    transformation: Transformation


@dataclass(frozen=True)
class Symlink:
    namespace: str
    name: str
    type: str


@dataclass(frozen=True)
class Identity:
    namespace: str
    name: str
    symlinks: tuple[Symlink, ...] = ()

    @property
    def node(self) -> tuple[str, str]:
        """The dataset in a lineage graph (``lineage/graph.py``): (namespace, name)."""
        return self.namespace, self.name


@dataclass(frozen=True)
class ProducingJob:
    """The job that writes a dataset: its OpenLineage job name and processing type."""

    name: str
    streaming: bool
    source: str  # the code that does the work, relative to the project root
    engine: str = "spark"
    former_names: tuple[str, ...] = ()  # what it was called before a rename: their lineage is history

    @property
    def processing_type(self) -> str:
        return "STREAMING" if self.streaming else "BATCH"

    @property
    def lineage_name(self) -> str:
        """The OpenLineage job name: already the name Marquez gives a child of the orchestrator's job, so
        a materialization (a child run) and a deployment (no parent) report one and the same job."""
        return f"{ORCHESTRATOR_JOB}.{self.name}"

    @property
    def spark_application(self) -> str:
        """The name of its Spark application, which openlineage-spark gives the application's job:
        already snake_case, as the agent would make it."""
        return f"{self.name.replace('-', '_')}_spark"


@dataclass(frozen=True)
class Dataset:
    """``column_lineage`` is the expectation each run's observed lineage (what Spark planned) is held
    against: per column, the input fields it is computed from or chosen by; ``indirect``: the input
    fields that decide which rows there are (filters, group-by keys), so they shape every column."""

    key: str  # the Dagster asset key, "/"-separated
    kind: Kind
    job: ProducingJob
    title: str
    description: str
    columns: tuple[Column, ...]
    identity: Callable[[Settings], Identity]
    column_lineage: dict[str, tuple[ColumnSource, ...]] = field(default_factory=dict)
    indirect: tuple[ColumnSource, ...] = ()
    record_key: str | None = None  # a topic's field that is also each record's key

    @property
    def asset_key_path(self) -> list[str]:
        return self.key.split("/")

    @property
    def node_name(self) -> str:
        """Its asset's op in a Dagster job, and the key of the step that materializes it."""
        return "__".join(self.asset_key_path)

    @property
    def upstream(self) -> tuple[str, ...]:
        """Datasets this one is computed from, in first-seen order (the asset graph's edges)."""
        seen: dict[str, None] = {}
        for sources in (*self.column_lineage.values(), self.indirect):
            for source in sources:
                seen.setdefault(source.dataset, None)
        return tuple(seen)

    @property
    def expected_lineage(self) -> dict[str, tuple[ColumnSource, ...]]:
        """Every column's expected inputs: its own, then the dataset-wide ``indirect`` ones."""
        if not self.upstream:
            return {}
        return {column.name: (*self.column_lineage.get(column.name, ()), *self.indirect) for column in self.columns}


def _named(naming, symlinks: tuple[Symlink, ...] = ()) -> Identity:
    return Identity(namespace=naming.get_namespace(), name=naming.get_name(), symlinks=symlinks)


def _spark(*functions: str) -> frozenset[str]:
    """The functions (expression classes) of a transformation in Spark's analyzed plan."""
    return frozenset(functions)


# Reading the schema id from a value's Confluent frame: its bytes 2-5 as hex, then a number.
SCHEMA_ID_FUNCTIONS = _spark("Substring", "Hex", "Conv", "Cast", "Coalesce", "CaseWhen")
# Spark's tumbling window over bid_time as its analyzer expands `window()`, then rendered as ISO text.
WINDOW_FUNCTIONS = _spark("PreciseTimestampConversion", "Subtract", "Remainder", "Add", "CaseWhen", "DateFormatClass")


def kafka_identity(topic: Callable[[Settings], str]) -> Callable[[Settings], Identity]:
    def identity(settings: Settings) -> Identity:
        # The spec names a topic by the first bootstrap server.
        host, port = settings.kafka_servers.split(",")[0].strip().rsplit(":", 1)
        return _named(Kafka(bootstrap_server_host=host, port=port, topic=topic(settings)))

    return identity


def iceberg_identity(table: str) -> Callable[[Settings], Identity]:
    def identity(settings: Settings) -> Identity:
        # As openlineage-spark names a REST catalog's table: its location, plus a symlink to the
        # catalog table whose namespace is the catalog URI exactly as configured.
        return _named(
            S3(bucket_name=settings.warehouse_bucket, object_key=f"{settings.iceberg_namespace}/{table}"),
            symlinks=(
                Symlink(
                    namespace=settings.iceberg_catalog_url, name=f"{settings.iceberg_namespace}.{table}", type="TABLE"
                ),
            ),
        )

    return identity


def iceberg_table_name(settings: Settings, table: str) -> str:
    """The table as Spark SQL names it in the project's catalog."""
    return f"{settings.catalog_name}.`{settings.iceberg_namespace}`.{table}"


def _identity_from(dataset: str, *columns: str) -> dict[str, tuple[ColumnSource, ...]]:
    return {column: (ColumnSource(dataset, column, Transformation.identity()),) for column in columns}


def _every_field(dataset: str, fields: tuple[str, ...], transformation: Transformation) -> tuple[ColumnSource, ...]:
    return tuple(ColumnSource(dataset, name, transformation) for name in fields)


# --- the orders topic ---------------------------------------------------------------------------

ORDER_FIELDS = (
    Column("order_id", "string", "order id (random UUID); also the record key"),
    Column("bid_time", "timestamp-millis", "when the bid was made (UTC)"),
    Column("price", "string", "price in the source's text form, two decimals, 1.00 to 150.00"),
    Column("item", "string", "product name"),
    Column("supplier", "string", "supplier name"),
)

# The value schema registered under `orders-value`. The source sends price as text (as the
# reference's generator did); fields other than the key are nullable so that a producer that
# leaves one out is caught by the jobs' validation and dead-lettered, not rejected at decode.
ORDERS_AVRO_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "Order",
    "namespace": "lineage_assets.orders",
    "fields": [
        {"name": "order_id", "type": "string"},
        {"name": "bid_time", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}], "default": None},
        {"name": "price", "type": ["null", "string"], "default": None},
        {"name": "item", "type": ["null", "string"], "default": None},
        {"name": "supplier", "type": ["null", "string"], "default": None},
    ],
}


@cache
def orders_avro_schema_json() -> str:
    return json.dumps(ORDERS_AVRO_SCHEMA)


def with_aliases(schema: dict, **aliases: tuple[str, ...]) -> dict:
    """``schema`` whose fields also answer to other names (Avro aliases): ``supplier=("vendor",)``."""
    unknown = set(aliases) - {f["name"] for f in schema["fields"]}
    if unknown:
        raise ValueError(f"{schema['name']} has no field {', '.join(sorted(unknown))}")
    return {
        **schema,
        "fields": [
            {**f, "aliases": [*f.get("aliases", ()), *aliases[f["name"]]]} if f["name"] in aliases else f
            for f in schema["fields"]
        ],
    }


# What the pipeline reads `orders` as: every registered writer version is judged against it
# (lineage_assets/source_schemas.py), and the Spark jobs decode each readable version into it.
# Never the registry's latest version: a producer's new version must not change what the jobs
# cast. To teach the pipeline a version that renamed a field, alias the field here, e.g.
# `with_aliases(ORDERS_AVRO_SCHEMA, supplier=("vendor",))`, then replay its dead letters
# (`lineage-assets dlq replay`).
ORDERS_READER_SCHEMA = ORDERS_AVRO_SCHEMA


def orders_reader_schema_json() -> str:
    return json.dumps(ORDERS_READER_SCHEMA)


ORDER_FIELD_NAMES = tuple(c.name for c in ORDER_FIELDS)

# Which writer version decodes a record is chosen by the schema id in its bytes: every field of the
# record decides which decoder gives a decoded field its value.
CHOSEN_BY_FRAME = Transformation(
    "INDIRECT", "CONDITIONAL", "decoded with the writer version the frame's schema id names"
)
# Only records that decode and pass validation: every field can make a record a dead letter.
VALID_RECORDS = Transformation("INDIRECT", "FILTER", "valid records only; the others are dead letters")


def _decoded(field_name: str, transformation: Transformation, dataset: str = "orders") -> tuple[ColumnSource, ...]:
    """A field of an `orders` record read through the decoder: from that field, and chosen by the others."""
    return (
        ColumnSource(dataset, field_name, transformation),
        *_every_field(dataset, tuple(f for f in ORDER_FIELD_NAMES if f != field_name), CHOSEN_BY_FRAME),
    )


ORDERS = Dataset(
    key="orders",
    kind=Kind.KAFKA,
    job=ProducingJob("orders-source", streaming=False, source="lineage_assets/generator.py", engine="python"),
    title="orders topic",
    description="Kafka topic `orders`: one Avro record per order (schema `orders-value` in the registry), "
    "key order_id.",
    columns=ORDER_FIELDS,
    identity=kafka_identity(lambda s: s.orders_topic),
    record_key="order_id",
)

ARCHIVE = Dataset(
    key="orders_archive",
    kind=Kind.S3,
    job=ProducingJob("orders-s3-sink", streaming=True, source="spark/archive_orders.py"),
    title="raw orders archive",
    description="Every record of `orders`, bytes unchanged plus decoded fields, as JSON files in "
    "s3://archive/orders/date=YYYY-MM-DD/hour=HH/ (Kafka time, UTC), each record exactly once.",
    columns=(
        Column("topic", "string", "source topic"),
        Column("partition", "int", "source partition"),
        Column("offset", "bigint", "source offset"),
        Column("timestamp", "timestamp", "Kafka record time (UTC)"),
        Column("key", "string", "record key (order_id)"),
        Column("value_base64", "string", "the record's value bytes, base64, unchanged"),
        Column("schema_id", "int", "registry id of the schema the record was written with (its Confluent frame)"),
        Column("order_id", "string", "decoded order_id"),
        Column("bid_time", "timestamp", "decoded bid_time"),
        Column("price_text", "string", "decoded price, as sent"),
        Column("item", "string", "decoded item"),
        Column("supplier", "string", "decoded supplier"),
        Column("dead_letter_reason", "string", "why the record could not be decoded, if it could not"),
        Column("date", "string", "UTC date of the Kafka record time (the partition folder)"),
        Column("hour", "string", "UTC hour of the Kafka record time (the partition folder)"),
    ),
    identity=lambda s: _named(S3(bucket_name=s.archive_bucket, object_key=s.archive_prefix)),
    # topic, partition, offset, timestamp and the folders made of it come from the record's metadata,
    # which is no field of the topic's schema.
    column_lineage={
        **{name: _decoded(name, Transformation.identity()) for name in ("order_id", "bid_time", "item", "supplier")},
        "price_text": _decoded("price", Transformation.identity()),
        "key": (
            ColumnSource(
                "orders",
                "order_id",
                Transformation("DIRECT", "TRANSFORMATION", "the record key's bytes as text", _spark("Cast")),
            ),
        ),
        "value_base64": _every_field(
            "orders",
            ORDER_FIELD_NAMES,
            Transformation("DIRECT", "TRANSFORMATION", "Avro value bytes, base64", _spark("Base64")),
        ),
        "schema_id": _every_field(
            "orders",
            ORDER_FIELD_NAMES,
            Transformation(
                "DIRECT", "TRANSFORMATION", "the writer schema id of the value's Confluent frame", SCHEMA_ID_FUNCTIONS
            ),
        ),
        "dead_letter_reason": _every_field(
            "orders",
            ORDER_FIELD_NAMES,
            Transformation(
                "DIRECT",
                "TRANSFORMATION",
                "why the value does not decode, or which field is missing or invalid",
                SCHEMA_ID_FUNCTIONS | _spark("Concat"),
            ),
        ),
    },
)

WINDOW = Transformation("INDIRECT", "GROUP_BY", "grouped by 5 s tumbling event-time window of bid_time")

SUPPLIER_STATS_LIVE = Dataset(
    key="supplier_stats_live",
    kind=Kind.KAFKA,
    job=ProducingJob("supplier-stats", streaming=True, source="spark/live_supplier_stats.py"),
    title="live supplier statistics topic",
    description="Kafka topic `supplier-stats`: per supplier and 5 s event-time tumbling window "
    "(watermark 5 s), total price and count; JSON values keyed by supplier.",
    columns=(
        Column("window_start", "timestamp", "window start (UTC, inclusive)"),
        Column("window_end", "timestamp", "window end (UTC, exclusive)"),
        Column("supplier", "string", "supplier name"),
        Column("total_price", "decimal(12,2)", "sum of price in the window"),
        Column("count", "bigint", "orders in the window"),
    ),
    identity=kafka_identity(lambda s: s.supplier_stats_topic),
    column_lineage={
        "window_start": _decoded(
            "bid_time", Transformation("DIRECT", "TRANSFORMATION", "start of bid_time's window", WINDOW_FUNCTIONS)
        ),
        "window_end": _decoded(
            "bid_time", Transformation("DIRECT", "TRANSFORMATION", "end of bid_time's window", WINDOW_FUNCTIONS)
        ),
        "supplier": _decoded("supplier", Transformation.identity()),
        "total_price": _decoded(
            "price", Transformation("DIRECT", "AGGREGATION", "SUM(CAST(price AS DECIMAL(10,2)))", _spark("Sum", "Cast"))
        ),
        # count is COUNT(*): it reads no column, only the rows the window and supplier group.
    },
    indirect=(
        *_every_field("orders", ORDER_FIELD_NAMES, VALID_RECORDS),
        ColumnSource(
            "orders", "bid_time", Transformation("INDIRECT", "FILTER", "records behind the 5 s watermark are dropped")
        ),
        ColumnSource("orders", "bid_time", WINDOW),
        ColumnSource("orders", "supplier", Transformation("INDIRECT", "GROUP_BY", "grouped by supplier")),
    ),
)

LAKEHOUSE_ORDERS = Dataset(
    key="lakehouse/orders",
    kind=Kind.ICEBERG,
    job=ProducingJob("iceberg-ingestion", streaming=True, source="spark/ingest_orders.py"),
    title="Iceberg orders table",
    description="Iceberg table `default.orders` (format v2, parquet, snappy), partitioned by day(bid_time); "
    "price cast to DECIMAL(10,2). Invalid records go to the dead-letter topic instead.",
    columns=(
        Column("order_id", "string", "order id"),
        Column("item", "string", "product name"),
        Column("price", "decimal(10,2)", "price, cast from the source's text"),
        Column("supplier", "string", "supplier name"),
        Column("bid_time", "timestamp_ntz", "bid time, UTC wall clock without zone"),
    ),
    identity=iceberg_identity("orders"),
    column_lineage={
        **{name: _decoded(name, Transformation.identity()) for name in ("order_id", "item", "supplier")},
        "price": _decoded(
            "price", Transformation("DIRECT", "TRANSFORMATION", "CAST(price AS DECIMAL(10,2))", _spark("Cast"))
        ),
        "bid_time": _decoded(
            "bid_time",
            Transformation("DIRECT", "TRANSFORMATION", "timestamp-millis to TIMESTAMP_NTZ (UTC)", _spark("Cast")),
        ),
    },
    indirect=_every_field("orders", ORDER_FIELD_NAMES, VALID_RECORDS),
)

HOUR_GROUP = Transformation("INDIRECT", "GROUP_BY", "grouped by date and hour of bid_time")

SUPPLIER_STATS = Dataset(
    key="lakehouse/supplier_stats",
    kind=Kind.ICEBERG,
    job=ProducingJob(
        "daily-supplier-stats", streaming=False, source="spark/supplier_stats.py", former_names=("supplier_stats",)
    ),
    title="Iceberg supplier_stats table",
    description="Iceberg table `default.supplier_stats` (format v2), partitioned by bid_date and bid_hour: "
    "SUM(price) and COUNT(*) per supplier and hour of one day; a run overwrites exactly its day.",
    columns=(
        Column("supplier", "string", "supplier name"),
        Column("bid_date", "date", "UTC date of bid_time"),
        Column("bid_hour", "int", "UTC hour of bid_time"),
        Column("total_price", "decimal(10,2)", "sum of price"),
        Column("total_count", "bigint", "number of orders"),
    ),
    identity=iceberg_identity("supplier_stats"),
    column_lineage={
        "supplier": (ColumnSource("lakehouse/orders", "supplier", Transformation.identity()),),
        "bid_date": (
            ColumnSource(
                "lakehouse/orders",
                "bid_time",
                Transformation("DIRECT", "TRANSFORMATION", "to_date(bid_time)", _spark("ParseToDate")),
            ),
        ),
        "bid_hour": (
            ColumnSource(
                "lakehouse/orders",
                "bid_time",
                Transformation("DIRECT", "TRANSFORMATION", "hour(bid_time)", _spark("Hour")),
            ),
        ),
        "total_price": (
            ColumnSource(
                "lakehouse/orders",
                "price",
                Transformation("DIRECT", "AGGREGATION", "SUM(price)", _spark("Sum", "Cast")),
            ),
        ),
        # total_count is COUNT(*): it reads no column, only the rows each group holds.
    },
    indirect=(
        ColumnSource("lakehouse/orders", "bid_time", Transformation("INDIRECT", "FILTER", "orders of the run's day")),
        ColumnSource("lakehouse/orders", "bid_time", HOUR_GROUP),
        ColumnSource("lakehouse/orders", "supplier", Transformation("INDIRECT", "GROUP_BY", "grouped by supplier")),
    ),
)

DATASETS: dict[str, Dataset] = {
    d.key: d for d in (ORDERS, ARCHIVE, SUPPLIER_STATS_LIVE, LAKEHOUSE_ORDERS, SUPPLIER_STATS)
}


def retired_jobs() -> dict[str, str]:
    """The OpenLineage names a renamed job reported under before (its own, its Spark application's,
    and Marquez's name for that application under it) -> its current name. Their runs stay in the
    event log and in Marquez as history (``lineage-assets lineage retire`` hides them in Marquez)."""
    retired = {}
    for dataset in DATASETS.values():
        for former in dataset.job.former_names:
            job = dataclasses.replace(dataset.job, name=former)
            for name in (job.lineage_name, job.spark_application, f"{job.lineage_name}.{job.spark_application}"):
                retired[name] = dataset.job.lineage_name
    return retired


# --- asset checks -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """An asset check evaluated on its own (not inside its asset's run): in the lineage, a job that
    reads the dataset it checks, one run per evaluation nested under the Dagster run, its results
    as ``dataQualityAssertions`` on that input. ``columns``: the columns its assertions test, the
    dataset as a whole when empty; a column's impact lists the checks that test it."""

    name: str
    dataset: str  # a key of DATASETS
    description: str
    columns: tuple[str, ...]
    source: str  # the module that defines it, relative to the project root

    @property
    def lineage_name(self) -> str:
        return f"{ORCHESTRATOR_JOB}.check.{self.name}"


CHECKS: dict[str, Check] = {
    c.name: c
    for c in (
        Check(
            "archive_reconciles_with_topic",
            ARCHIVE.key,
            "The archive holds exactly as many records as the topic offsets it consumed, each offset once.",
            (),
            "lineage_assets/assets/archive.py",
        ),
        Check(
            "orders_reconcile_with_topic",
            LAKEHOUSE_ORDERS.key,
            "Rows in Iceberg plus dead letters equal the topic records the ingestion consumed.",
            (),
            "lineage_assets/assets/lakehouse.py",
        ),
        Check(
            "orders_values_in_range",
            LAKEHOUSE_ORDERS.key,
            "Every row has an order id, supplier and bid time, and a price in 0.01 .. 99999999.99.",
            ("order_id", "supplier", "bid_time", "price"),
            "lineage_assets/assets/lakehouse.py",
        ),
    )
}

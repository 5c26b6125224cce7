"""What each dataset *is*: asset key, OpenLineage namespace and name, symlinks, schema, designed column lineage.

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
from dataclasses import dataclass
from enum import Enum
from functools import cache
from typing import Any

from openlineage.client.naming.dataset import S3, Kafka

from lineage_assets.column_lineage import ColumnSource, Derivations, designed_lineage
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


TABLE_JOB = "spark/table_job.py"  # the job of every dataset a ``DailyTable`` declares


@dataclass(frozen=True)
class Reconciliation:
    """A check that one day of a written column adds up to that day of an input's column (the input
    partitioned by the same day column): a join that repeats a row would count it twice."""

    column: str
    input: str  # a key of DATASETS, one of the dataset's inputs
    input_column: str

    @property
    def check_name(self) -> str:
        return f"{self.column}_reconciles_with_{self.input.rsplit('/', 1)[-1]}"

    @property
    def description(self) -> str:
        return f"The day's sum of {self.column} equals that of {self.input}.{self.input_column} in the snapshot read."


@dataclass(frozen=True)
class DailyTable:
    """How a table is computed one day at a time by ``spark/table_job.py``: ``transform``
    (``module:function``) is called with each input's rows, in the dataset's ``inputs`` order, and
    the day, and its rows replace the day's (``partition_column``). Inputs in ``as_of_day`` are read
    as they stood when the day ended (a dimension's history: the upkeep keeps their snapshots); the
    others at their current snapshot. ``reconciles`` and ``required`` (columns every row fills) are
    checked in each run."""

    transform: str
    partition_column: str = "bid_date"
    as_of_day: tuple[str, ...] = ()
    reconciles: tuple[Reconciliation, ...] = ()
    required: tuple[str, ...] = ()

    @property
    def required_check(self) -> str:
        return f"{'_and_'.join(self.required)}_present"

    @property
    def required_description(self) -> str:
        return f"Every row of the day has a value for {', '.join(self.required)}."

    @property
    def check_names(self) -> tuple[str, ...]:
        """The checks each run evaluates beside the lineage check."""
        return (*(r.check_name for r in self.reconciles), *((self.required_check,) if self.required else ()))


@dataclass(frozen=True)
class Dataset:
    """``inputs``: the datasets it is computed from (the asset graph's edges); how each column is
    computed from them is the designed lineage (``designed_lineage``), generated from the job's plan."""

    key: str  # the Dagster asset key, "/"-separated
    kind: Kind
    job: ProducingJob
    title: str
    description: str
    columns: tuple[Column, ...]
    identity: Callable[[Settings], Identity]
    inputs: tuple[str, ...] = ()
    record_key: str | None = None  # a topic's field that is also each record's key
    computed_by: DailyTable | None = None  # a table computed by a transform, one day at a time

    @property
    def table(self) -> str:
        """An Iceberg dataset's table in the project's namespace: the last part of its key."""
        return self.key.rsplit("/", 1)[-1]

    @property
    def asset_key_path(self) -> list[str]:
        return self.key.split("/")

    @property
    def node_name(self) -> str:
        """Its asset's op in a Dagster job, and the key of the step that materializes it."""
        return "__".join(self.asset_key_path)

    @property
    def upstream(self) -> tuple[str, ...]:
        """Datasets this one is computed from (the asset graph's edges)."""
        return self.inputs

    @property
    def designed(self) -> Derivations | None:
        """How its job computes it, as reviewed (None: no job of the project's computes it)."""
        return designed_lineage().get(self.key)

    @property
    def expected_lineage(self) -> dict[str, tuple[ColumnSource, ...]]:
        """Every column's expected sources, each with its derivation (``Derivations.lineage``)."""
        return self.designed.lineage() if self.designed is not None else {}


def _named(naming, symlinks: tuple[Symlink, ...] = ()) -> Identity:
    return Identity(namespace=naming.get_namespace(), name=naming.get_name(), symlinks=symlinks)


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


def foreign_identity(source: str, location: str | None, settings: Settings) -> Identity | None:
    """An input that is no dataset of the catalog, as a Spark plan names it (``kafka:<topic>``,
    ``table:<catalog table>``), named as openlineage-spark names it: a topic of the project's cluster,
    a table by its location with a symlink to its catalog name. None for rows no name reaches (made in
    memory, or a table whose location the run did not report)."""
    kind, _, name = source.partition(":")
    if kind == "kafka":
        return kafka_identity(lambda s: name)(settings)
    if kind == "table" and location and "://" in location:
        bucket, _, key = location.split("://", 1)[1].partition("/")
        table = name.removeprefix(f"{settings.catalog_name}.")
        return _named(
            S3(bucket_name=bucket, object_key=key),
            symlinks=(Symlink(namespace=settings.iceberg_catalog_url, name=table, type="TABLE"),),
        )
    return None


def iceberg_table_name(settings: Settings, table: str) -> str:
    """The table as Spark SQL names it in the project's catalog."""
    return f"{settings.catalog_name}.`{settings.iceberg_namespace}`.{table}"


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
    inputs=("orders",),
)


SUPPLIER_STATS_LIVE = Dataset(
    key="supplier_stats_live",
    kind=Kind.KAFKA,
    job=ProducingJob("supplier-stats", streaming=True, source="spark/live_supplier_stats.py"),
    title="live supplier statistics topic",
    description="Kafka topic `supplier-stats`: per supplier and 5 s event-time tumbling window "
    "(watermark 5 s), total price and count; JSON values keyed by supplier.",
    columns=(
        Column("window_start", "string", "window start (UTC, inclusive), ISO 8601"),
        Column("window_end", "string", "window end (UTC, exclusive), ISO 8601"),
        Column("supplier", "string", "supplier name"),
        Column("total_price", "decimal(12,2)", "sum of price in the window"),
        Column("count", "bigint", "orders in the window"),
    ),
    identity=kafka_identity(lambda s: s.supplier_stats_topic),
    inputs=("orders",),
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
    inputs=("orders",),
)


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
    inputs=("lakehouse/orders",),
)

# --- the supplier dimension ----------------------------------------------------------------------

SUPPLIER_FIELDS = (
    Column("supplier", "string", "supplier name; also the record key"),
    Column("region", "string", "sales region"),
    Column("tier", "string", "commercial tier: gold, silver or bronze"),
    Column("updated_at", "timestamp-millis", "when this state of the supplier took effect (UTC)"),
)

# The value schema registered under `suppliers-value`, and what the pipeline reads it as. Fields other
# than the key are nullable, as the orders', so that a record that lacks one is dead-lettered, not refused.
SUPPLIERS_AVRO_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "Supplier",
    "namespace": "lineage_assets.suppliers",
    "fields": [
        {"name": "supplier", "type": "string"},
        {"name": "region", "type": ["null", "string"], "default": None},
        {"name": "tier", "type": ["null", "string"], "default": None},
        {"name": "updated_at", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}], "default": None},
    ],
}


def suppliers_avro_schema_json() -> str:
    return json.dumps(SUPPLIERS_AVRO_SCHEMA)


SUPPLIERS = Dataset(
    key="suppliers",
    kind=Kind.KAFKA,
    job=ProducingJob("suppliers-source", streaming=False, source="lineage_assets/generator.py", engine="python"),
    title="suppliers topic",
    description="Compacted Kafka topic `suppliers`: the supplier dimension, one Avro record per change of a "
    "supplier (schema `suppliers-value`), key supplier; compaction keeps each supplier's latest.",
    columns=SUPPLIER_FIELDS,
    identity=kafka_identity(lambda s: s.suppliers_topic),
    record_key="supplier",
)

LAKEHOUSE_SUPPLIERS = Dataset(
    key="lakehouse/suppliers",
    kind=Kind.ICEBERG,
    job=ProducingJob("suppliers-ingestion", streaming=True, source="spark/ingest_suppliers.py"),
    title="Iceberg suppliers table",
    description="Iceberg table `default.suppliers` (format v2): each supplier's current state, merged by "
    "key from `suppliers` (a record older than the row's state changes nothing). Invalid records go to "
    "the dimension's dead-letter topic.",
    columns=(
        Column("supplier", "string", "supplier name"),
        Column("region", "string", "sales region"),
        Column("tier", "string", "commercial tier"),
        Column("updated_at", "timestamp_ntz", "when this state took effect, UTC wall clock without zone"),
    ),
    identity=iceberg_identity("suppliers"),
    inputs=("suppliers",),
)

SUPPLIER_REVENUE = Dataset(
    key="lakehouse/supplier_revenue",
    kind=Kind.ICEBERG,
    job=ProducingJob("daily-supplier-revenue", streaming=False, source=TABLE_JOB),
    title="Iceberg supplier_revenue table",
    description="Iceberg table `default.supplier_revenue` (format v2), partitioned by bid_date: per supplier "
    "and day, its revenue from `supplier_stats` with its region and tier as `suppliers` held them at the "
    "day's end, and its rank by revenue within its region; a run overwrites exactly its day.",
    columns=(
        Column("bid_date", "date", "UTC date"),
        Column("supplier", "string", "supplier name"),
        Column("region", "string", "the supplier's region as of the day (null: not in the dimension)"),
        Column("tier", "string", "the supplier's tier as of the day"),
        Column("revenue", "decimal(12,2)", "sum of the day's total_price"),
        Column("orders", "bigint", "orders of the day"),
        Column("region_rank", "int", "rank by revenue within the region, 1 = highest"),
    ),
    identity=iceberg_identity("supplier_revenue"),
    inputs=("lakehouse/supplier_stats", "lakehouse/suppliers"),
    computed_by=DailyTable(
        "spark.transforms:supplier_revenue",
        as_of_day=("lakehouse/suppliers",),
        reconciles=(Reconciliation("revenue", "lakehouse/supplier_stats", "total_price"),),
        required=("region", "tier"),
    ),
)

DATASETS: dict[str, Dataset] = {
    d.key: d
    for d in (
        ORDERS,
        ARCHIVE,
        SUPPLIER_STATS_LIVE,
        LAKEHOUSE_ORDERS,
        SUPPLIER_STATS,
        SUPPLIERS,
        LAKEHOUSE_SUPPLIERS,
        SUPPLIER_REVENUE,
    )
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


# The check every Spark-written asset's run evaluates in the run itself, from what its plan computed:
# that it is the designed lineage (no lineage job of its own; the lineage check reads the run's facets).
LINEAGE_CHECK = "lineage_matches_catalog"

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

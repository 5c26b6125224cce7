"""The Iceberg tables: `orders` (streaming ingestion) and `supplier_stats` (daily batch), their
checks, and the sensor that recomputes `supplier_stats` for the days new orders landed in (their
upkeep: ``lakehouse_upkeep.py``)."""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import dagster as dg
from dagster_pyspark import PySparkResource

from lineage_assets.assets.common import (
    Outcome,
    StreamingRun,
    asset_key,
    asset_spec_arguments,
    check_arguments,
    lineage_check_result,
    lineage_check_spec,
    orders_read_by,
    run_metadata,
    run_table_job,
    streaming_asset,
)
from lineage_assets.datasets import CHECKS, LAKEHOUSE_ORDERS, SUPPLIER_STATS, iceberg_table_name
from lineage_assets.dead_letters import TEACH_THEN_REPLAY
from lineage_assets.job_specs import IngestionReport, SupplierStatsReport, ingestion_job, supplier_stats_job
from lineage_assets.lineage.run_facts import Assertion, OutputStatistics, RunFacts, snapshot_written, table_read
from lineage_assets.resources.kafka import KafkaResource
from lineage_assets.resources.lineage import LineageResource
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.resources.spark_jobs import SparkJobsResource
from lineage_assets.settings import Settings
from lineage_assets.spark_conf import committed_table

DAILY = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_offset=1, timezone="UTC")
PRICE_MAX = "99999999.99"  # DECIMAL(10,2)
ORDERS_RECONCILE, ORDERS_VALUES = CHECKS["orders_reconcile_with_topic"], CHECKS["orders_values_in_range"]
# Per column the catalog says ORDERS_VALUES tests: its kind of test and the condition a failing row meets.
VALUE_TESTS = {
    column: ("range", f"price IS NULL OR price <= 0 OR price > {PRICE_MAX}")
    if column == "price"
    else ("not_null", f"{column} IS NULL")
    for column in ORDERS_VALUES.columns
}
SCHEMA_CHECK = "orders_schema_readable"
SCHEMA_CHECK_DESCRIPTION = (
    "No record of `orders` waits in the dead-letter topic for a writer schema version the "
    "pipeline cannot read (dead-lettered `schema_incompatible` and not replayed yet). While "
    "one does, `supplier_stats` is not rebuilt for the days written since."
)


@dataclass(frozen=True)
class Rebuild:
    """Which days `supplier_stats` should be rebuilt for after an ingestion, and which wait.

    Records of an unreadable version are missing from their days until replayed: the days written
    while any is outstanding are held back, and released together once the replays are back."""

    days: list[str]
    held_back: list[str]
    outstanding: int  # schema_incompatible dead letters not replayed yet

    @staticmethod
    def after(previous: Mapping[str, Any], days: list[str], incompatible: int, returned: int) -> "Rebuild":
        """``previous``: the metadata of the asset's last materialization."""
        outstanding = max(0, previous.get("schema_incompatible_outstanding", 0) + incompatible - returned)
        pending = sorted(set(previous.get("days_held_back", [])) | set(days))
        return Rebuild([], pending, outstanding) if outstanding else Rebuild(pending, [], 0)

    @property
    def values(self) -> dict:
        """As the next ``after`` reads them from this materialization's metadata."""
        return {
            "days": self.days,
            "days_held_back": self.held_back,
            "schema_incompatible_outstanding": self.outstanding,
        }

    @property
    def metadata(self) -> dict:
        return {
            key: dg.MetadataValue.json(value) if isinstance(value, list) else value
            for key, value in self.values.items()
        }

    def assertion(self) -> Assertion:
        return Assertion(
            SCHEMA_CHECK,
            "schema_compatible",
            not self.outstanding,
            SCHEMA_CHECK_DESCRIPTION,
            expected="0",
            actual=str(self.outstanding),
            blocking=True,
        )

    def _check(self) -> dict:
        return {
            "check_name": SCHEMA_CHECK,
            "passed": not self.outstanding,
            "description": SCHEMA_CHECK_DESCRIPTION,
            "metadata": {
                "schema_incompatible_outstanding": self.outstanding,
                "days_held_back": dg.MetadataValue.json(self.held_back),
            },
        }

    def check_result(self) -> dg.AssetCheckResult:
        """The check as the ingestion asset yields it."""
        return dg.AssetCheckResult(**self._check())

    def check_evaluation(self) -> dg.AssetCheckEvaluation:
        """The check as a sensor reports it, for a deployment's commit (no run)."""
        return dg.AssetCheckEvaluation(asset_key=asset_key(LAKEHOUSE_ORDERS), blocking=True, **self._check())


def _materialization(event: dg.EventLogEntry | dg.EventLogRecord) -> dg.AssetMaterialization:
    """The materialization of an event that a materialization query or sensor gave."""
    if event.asset_materialization is None:
        raise dg.DagsterInvariantViolationError(
            f"the event of run {event.run_id} at {event.timestamp} is no materialization"
        )
    return event.asset_materialization


def _listed_days(metadata: Mapping[str, dg.MetadataValue], name: str) -> list[str]:
    """The days a materialization's ``name`` entry lists (``Rebuild.metadata``); none without that entry."""
    entry = metadata.get(name)
    if entry is None:
        return []
    if not isinstance(entry, dg.JsonMetadataValue) or not isinstance(entry.value, list):
        raise ValueError(f"materialization metadata {name} is not a JSON list of days: {entry!r}")
    return entry.value


def latest_metadata(instance: dg.DagsterInstance, key: dg.AssetKey) -> dict[str, Any]:
    event = instance.get_latest_materialization_event(key)
    return {name: value.value for name, value in _materialization(event).metadata.items()} if event else {}


def days_behind(instance: dg.DagsterInstance) -> list[str]:
    """The days `supplier_stats` is behind `lakehouse/orders` on: each day an ingestion released for a
    rebuild (its materialization's ``days``) later than that day's last `supplier_stats`
    materialization. Dagster's event log holds both, so a day whose rebuild failed, or never ran (a
    pass that stopped early), is rebuilt by the next pass."""
    released: dict[str, float] = {}
    for record in _materializations(instance, dg.AssetRecordsFilter(asset_key(LAKEHOUSE_ORDERS))):
        for day in _listed_days(_materialization(record).metadata, "days"):
            released[day] = max(released.get(day, 0.0), record.timestamp)
    built = last_built(instance, list(released))
    return sorted(day for day, at in released.items() if built.get(day, 0.0) < at)


def last_built(instance: dg.DagsterInstance, days: list[str]) -> dict[str, float]:
    """When `supplier_stats` was last materialized for each of ``days`` (a day never built is absent)."""
    built: dict[str, float] = {}
    if days:
        partitions = dg.AssetRecordsFilter(asset_key(SUPPLIER_STATS), asset_partitions=sorted(days))
        for record in _materializations(instance, partitions):
            built[record.partition_key] = max(built.get(record.partition_key, 0.0), record.timestamp)
    return built


def _materializations(instance: dg.DagsterInstance, records: dg.AssetRecordsFilter):
    cursor = None
    while True:
        page = instance.fetch_materializations(records, limit=1000, cursor=cursor)
        yield from page.records
        if not page.has_more:
            return
        cursor = page.cursor


def snapshot_written_by(instance: dg.DagsterInstance, snapshot_id: int | None, settings: Settings) -> dict:
    """A link, in Dagster's UI, to the `lakehouse/orders` materialization that made ``snapshot_id``
    (the first of its recent ones to report it: a run that committed nothing names the table's
    snapshot again): on a `supplier_stats` partition's page, the ingestion it was computed from. Of a
    compaction's snapshot, pass the one whose rows it holds: no ingestion made the compaction's."""
    if snapshot_id is None:
        return {}
    newest = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key(LAKEHOUSE_ORDERS)), limit=100, ascending=False
    ).records
    made = [r for r in newest if (s := _materialization(r).metadata.get("snapshot_id")) and s.value == str(snapshot_id)]
    if not made:
        return {}
    record = made[-1]
    if record.run_id:
        url = f"{settings.dagster_url}/runs/{record.run_id}"
    else:  # a deployment's commit, reported without a run: the asset's event at that time
        url = f"{settings.dagster_url}/assets/{LAKEHOUSE_ORDERS.key}?view=events&time={int(record.timestamp * 1000)}"
    return {f"read/{LAKEHOUSE_ORDERS.key}/written_by": dg.MetadataValue.url(url)}


def table_metadata(snapshot_id: int | None, schema_id: int | None, quality: dict | None) -> dict:
    """An Iceberg table as a commit left it: its snapshot, schema id and ``quality`` (the whole table,
    from its manifests)."""
    if snapshot_id is None:
        return {}
    return {
        "snapshot_id": str(snapshot_id),
        "table_schema_id": schema_id,
        **({"dagster/row_count": quality["rows"], "quality": dg.MetadataValue.json(quality)} if quality else {}),
    }


def ingested(run: StreamingRun[IngestionReport]) -> Outcome:
    """What a catch-up ingestion wrote, the days of `supplier_stats` to rebuild, and its schema check."""
    report, settings, log = run.report, run.settings, run.context.log
    rebuild = Rebuild.after(
        latest_metadata(run.context.instance, asset_key(LAKEHOUSE_ORDERS)),
        report.days,
        report.schema_incompatible,
        report.dead_letters_replayed,
    )
    if report.dead_letters:
        log.warning(
            f"{report.dead_letters} records dead-lettered to {settings.dead_letter_topic}: {report.dead_letter_reasons}"
        )
    if rebuild.outstanding:
        log.error(
            f"{rebuild.outstanding} records wait in {settings.dead_letter_topic} for a schema version the "
            f"pipeline cannot read; supplier_stats is held back for {rebuild.held_back}: {TEACH_THEN_REPLAY}"
        )
    return Outcome(
        RunFacts(
            OutputStatistics(rows=report.rows_written),
            "CREATE" if report.table_created else None,
            version=snapshot_written(
                report.snapshot_id, report.schema_id, report.parent_snapshot_id, report.parent_data_snapshot_id
            ),
            quality=report.quality,
            reads=(orders_read_by(settings, report, (rebuild.assertion(),)),),
            partitions=tuple(report.days),
        ),
        metadata={
            "dead_letters": report.dead_letters,
            "dead_letter_reasons": dg.MetadataValue.json(report.dead_letter_reasons),
            "schema_incompatible": report.schema_incompatible,
            "dead_letters_replayed": report.dead_letters_replayed,
            **rebuild.metadata,
            "table_rows": report.table_rows,
            "table_created": report.table_created,
            "records_consumed": report.consumed_records,
            **table_metadata(report.snapshot_id, report.schema_id, report.quality),
        },
        check_results=(rebuild.check_result(),),
    )


lakehouse_orders = streaming_asset(
    LAKEHOUSE_ORDERS,
    ingestion_job,
    "lakehouse",
    ingested,
    topics=lambda settings: (settings.dead_letter_topic,),
    check_specs=[
        dg.AssetCheckSpec(
            SCHEMA_CHECK, asset=asset_key(LAKEHOUSE_ORDERS), blocking=True, description=SCHEMA_CHECK_DESCRIPTION
        )
    ],
)


@dg.asset(
    partitions_def=DAILY,
    check_specs=[lineage_check_spec(SUPPLIER_STATS)],
    **asset_spec_arguments(SUPPLIER_STATS, "lakehouse"),
)
def supplier_stats(
    context: dg.AssetExecutionContext,
    environment: SettingsResource,
    spark_jobs: SparkJobsResource,
    lineage: LineageResource,
) -> dg.MaterializeResult:
    """Recompute one day of hourly supplier totals; overwrites exactly that day."""

    def facts_of(report: SupplierStatsReport) -> RunFacts:
        return RunFacts(
            OutputStatistics(rows=report.rows_written, bytes=report.bytes_written, files=report.files_written),
            "CREATE" if report.table_created else "OVERWRITE",
            version=snapshot_written(report.snapshot_id, report.schema_id, report.parent_snapshot_id),
            quality=report.quality,
            reads=(
                table_read(
                    LAKEHOUSE_ORDERS, report.source_snapshot_id, report.source_schema_id, report.source_data_snapshot_id
                ),
            ),
            partitions=(report.day,) if report.day else (),
        )

    job = supplier_stats_job(environment.settings, context.partition_key)
    report, facts, observation = run_table_job(context, SUPPLIER_STATS, job, spark_jobs, lineage, facts_of)
    return dg.MaterializeResult(
        metadata={
            **run_metadata(report, facts),
            **snapshot_written_by(
                context.instance, report.source_data_snapshot_id or report.source_snapshot_id, environment.settings
            ),
            "day": report.day,
            "files_written": report.files_written,
            "bytes_written": report.bytes_written,
            "table_created": report.table_created,
            "totals": dg.MetadataValue.json(report.totals),
            **table_metadata(report.snapshot_id, report.schema_id, report.quality),
        },
        check_results=[lineage_check_result(SUPPLIER_STATS, observation)],
    )


# A day's totals, and every daily table computed from them: the sensor's rebuild of a day is the whole day.
rebuild_supplier_stats = dg.define_asset_job(
    "supplier_stats_job", selection=dg.AssetSelection.assets(asset_key(SUPPLIER_STATS)).downstream()
)


@dg.asset_sensor(
    asset_key=asset_key(LAKEHOUSE_ORDERS),
    job=rebuild_supplier_stats,
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="A new `lakehouse/orders` materialization requests `supplier_stats` for each day it touched.",
)
def supplier_stats_on_new_orders(context: dg.SensorEvaluationContext, asset_event: dg.EventLogEntry):
    metadata = _materialization(asset_event).metadata
    if held := _listed_days(metadata, "days_held_back"):
        yield dg.SkipReason(f"supplier_stats held back for {', '.join(held)}: check {SCHEMA_CHECK} failed")
    days = _listed_days(metadata, "days")
    built = last_built(context.instance, days)
    # A day built after these orders landed (a demo's pass, a run by hand) already holds them: a
    # daemon started later, as the first `make dev` after `make demo`, does not build it again.
    wanted = [day for day in days if built.get(day, 0.0) <= asset_event.timestamp]
    if days and not wanted:
        yield dg.SkipReason(f"supplier_stats built since these orders landed, for {', '.join(days)}")
    for day in wanted:
        # One request per (materialization, day): a re-evaluation never asks twice.
        yield dg.RunRequest(run_key=f"{asset_event.run_id}:{asset_event.timestamp}:{day}", partition_key=day)


@dg.asset_check(**check_arguments(ORDERS_RECONCILE))
def orders_reconcile_with_topic(
    context: dg.AssetCheckExecutionContext,
    environment: SettingsResource,
    pyspark: PySparkResource,
    kafka: KafkaResource,
    lineage: LineageResource,
) -> dg.AssetCheckResult:
    settings = environment.settings
    with lineage.check_run(context, ORDERS_RECONCILE) as run:
        event = context.instance.get_latest_materialization_event(asset_key(LAKEHOUSE_ORDERS))
        consumed = event.asset_materialization.metadata["records_consumed"].value if event else 0
        rows = committed_table(pyspark.spark_session, iceberg_table_name(settings, "orders")).count()
        dead = sum(kafka.end_offsets(settings.dead_letter_topic).values())
        return run.result(
            [
                Assertion(
                    ORDERS_RECONCILE.name,
                    "row_count",
                    rows + dead == consumed,
                    "rows in the table plus dead letters equal the topic records the ingestion consumed",
                    expected=str(consumed),
                    actual=str(rows + dead),
                )
            ],
            metadata={"table_rows": rows, "dead_letters": dead, "consumed_offsets": consumed},
        )


@dg.asset_check(**check_arguments(ORDERS_VALUES))
def orders_values_in_range(
    context: dg.AssetCheckExecutionContext,
    environment: SettingsResource,
    pyspark: PySparkResource,
    lineage: LineageResource,
) -> dg.AssetCheckResult:
    table = iceberg_table_name(environment.settings, "orders")
    with lineage.check_run(context, ORDERS_VALUES) as run:
        failing = (
            committed_table(pyspark.spark_session, table)
            .selectExpr(*(f"count_if({condition}) AS {column}" for column, (_, condition) in VALUE_TESTS.items()))
            .collect()[0]
            .asDict()
        )
        return run.result(
            [
                Assertion(
                    ORDERS_VALUES.name,
                    kind,
                    failing[column] == 0,
                    f"no row where {condition}",
                    column=column,
                    expected="0",
                    actual=str(failing[column]),
                    sql=f"SELECT count_if({condition}) FROM {table}",
                )
                for column, (kind, condition) in VALUE_TESTS.items()
            ],
            metadata={f"{column}_failing": count for column, count in failing.items()},
        )

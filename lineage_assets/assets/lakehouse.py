"""The Iceberg tables: `orders` (streaming ingestion) and `supplier_stats` (daily batch), their
checks, and the sensor that recomputes `supplier_stats` for the days new orders landed in."""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import dagster as dg
from dagster_pyspark import PySparkResource

from lineage_assets.assets.common import (
    asset_key,
    asset_spec_arguments,
    check_arguments,
    consumed_records,
    ensure_not_deployed,
    job_metadata,
    orders_source_arguments,
)
from lineage_assets.catalog import CHECKS, LAKEHOUSE_ORDERS, SUPPLIER_STATS, iceberg_table_name
from lineage_assets.dead_letters import TEACH_THEN_REPLAY
from lineage_assets.lineage.events import Assertion, DatasetVersion, OutputStatistics, orders_read
from lineage_assets.resources.kafka import KafkaResource
from lineage_assets.resources.lineage import LineageResource, lineage_folder
from lineage_assets.resources.spark_jobs import SparkJobsResource
from lineage_assets.settings import Settings

DAILY = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_offset=1, timezone="UTC")
PRICE_MAX = "99999999.99"  # DECIMAL(10,2)
ORDERS_RECONCILE, ORDERS_VALUES = CHECKS["orders_reconcile_with_topic"], CHECKS["orders_values_in_range"]
# Per column the catalog says ORDERS_VALUES tests: its kind of test and the condition a failing row meets.
VALUE_TESTS = {column: ("range", f"price IS NULL OR price <= 0 OR price > {PRICE_MAX}") if column == "price"
               else ("not_null", f"{column} IS NULL") for column in ORDERS_VALUES.columns}
SCHEMA_CHECK = "orders_schema_readable"
SCHEMA_CHECK_DESCRIPTION = ("No record of `orders` waits in the dead-letter topic for a writer schema version the "
                            "pipeline cannot read (dead-lettered `schema_incompatible` and not replayed yet). While "
                            "one does, `supplier_stats` is not rebuilt for the days written since.")


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
        return {"days": self.days, "days_held_back": self.held_back, "schema_incompatible_outstanding": self.outstanding}

    @property
    def metadata(self) -> dict:
        return {key: dg.MetadataValue.json(value) if isinstance(value, list) else value for key, value in self.values.items()}

    def assertion(self) -> Assertion:
        return Assertion(SCHEMA_CHECK, "schema_compatible", not self.outstanding, SCHEMA_CHECK_DESCRIPTION,
                         expected="0", actual=str(self.outstanding), blocking=True)

    def _check(self) -> dict:
        return {"check_name": SCHEMA_CHECK, "passed": not self.outstanding, "description": SCHEMA_CHECK_DESCRIPTION,
                "metadata": {"schema_incompatible_outstanding": self.outstanding,
                             "days_held_back": dg.MetadataValue.json(self.held_back)}}

    def check_result(self) -> dg.AssetCheckResult:
        """The check as the ingestion asset yields it."""
        return dg.AssetCheckResult(**self._check())

    def check_evaluation(self) -> dg.AssetCheckEvaluation:
        """The check as a sensor reports it, for a deployment's commit (no run)."""
        return dg.AssetCheckEvaluation(asset_key=asset_key(LAKEHOUSE_ORDERS), blocking=True, **self._check())


def latest_metadata(instance: dg.DagsterInstance, key: dg.AssetKey) -> dict[str, Any]:
    event = instance.get_latest_materialization_event(key)
    return {name: value.value for name, value in event.asset_materialization.metadata.items()} if event else {}


def table_quality_metadata(report: dict) -> dict:
    """An Iceberg job's ``quality`` (the whole table after the run, from its manifests) as metadata."""
    quality = report["quality"]
    if quality is None:
        return {}
    return {"dagster/row_count": quality["rows"], "quality": dg.MetadataValue.json(quality)}


def ingestion_job_arguments(kafka: KafkaResource, spark_jobs: SparkJobsResource) -> list[str]:
    settings = kafka.lakehouse.settings()
    return [
        *orders_source_arguments(kafka, spark_jobs, LAKEHOUSE_ORDERS),
        "--table", iceberg_table_name(settings, "orders"), "--dead-letter-topic", settings.dead_letter_topic,
        "--job-name", LAKEHOUSE_ORDERS.job.name,
    ]


def build_lakehouse_definitions(settings: Settings) -> dict:
    orders_table = iceberg_table_name(settings, "orders")
    stats_table = iceberg_table_name(settings, "supplier_stats")

    @dg.asset(check_specs=[dg.AssetCheckSpec(SCHEMA_CHECK, asset=asset_key(LAKEHOUSE_ORDERS), blocking=True,
                                             description=SCHEMA_CHECK_DESCRIPTION)],
              **asset_spec_arguments(LAKEHOUSE_ORDERS, settings, "lakehouse"))
    def lakehouse_orders(context: dg.AssetExecutionContext, kafka: KafkaResource,
                         spark_jobs: SparkJobsResource, lineage: LineageResource) -> dg.MaterializeResult:
        """Ingest new orders into Iceberg; invalid ones go to the dead-letter topic."""
        settings = kafka.lakehouse.settings()
        ensure_not_deployed(LAKEHOUSE_ORDERS, kafka)
        with lineage.asset_run(context, LAKEHOUSE_ORDERS) as run:
            kafka.ensure_topics(settings.dead_letter_topic)
            report = spark_jobs.submit(LAKEHOUSE_ORDERS.job.source, ingestion_job_arguments(kafka, spark_jobs), log=context.log)
            rebuild = Rebuild.after(latest_metadata(context.instance, asset_key(LAKEHOUSE_ORDERS)), report["days"],
                                    report["schema_incompatible"], report["dead_letters_replayed"])
            run.complete(OutputStatistics(rows=report["rows_written"]), "CREATE" if report["table_created"] else None,
                         version=DatasetVersion(str(report["snapshot_id"]), report["schema_id"]), quality=report["quality"],
                         reads=(orders_read(settings, report.get("schema_versions"), (rebuild.assertion(),)),))
        if report["dead_letters"]:
            context.log.warning(f"{report['dead_letters']} records dead-lettered to {settings.dead_letter_topic}: "
                                f"{report['dead_letter_reasons']}")
        if rebuild.outstanding:
            context.log.error(f"{rebuild.outstanding} records wait in {settings.dead_letter_topic} for a schema version the "
                              f"pipeline cannot read; supplier_stats is held back for {rebuild.held_back}: {TEACH_THEN_REPLAY}")
        return dg.MaterializeResult(metadata={
            **job_metadata(LAKEHOUSE_ORDERS, report),
            "dead_letters": report["dead_letters"],
            "dead_letter_reasons": dg.MetadataValue.json(report["dead_letter_reasons"]),
            "schema_incompatible": report["schema_incompatible"],
            "dead_letters_replayed": report["dead_letters_replayed"],
            **rebuild.metadata,
            "snapshot_id": str(report["snapshot_id"]),
            "table_schema_id": report["schema_id"],
            "table_rows": report["table_rows"],
            "table_created": report["table_created"],
            "records_consumed": consumed_records(report),
            **table_quality_metadata(report),
        }, check_results=[rebuild.check_result()])

    @dg.asset(partitions_def=DAILY, **asset_spec_arguments(SUPPLIER_STATS, settings, "lakehouse"))
    def supplier_stats(context: dg.AssetExecutionContext, spark_jobs: SparkJobsResource,
                       lineage: LineageResource) -> dg.MaterializeResult:
        """Recompute one day of hourly supplier totals; overwrites exactly that day."""
        with lineage.asset_run(context, SUPPLIER_STATS) as run:
            spark_events = lineage_folder(spark_jobs.lakehouse.settings()) / "spark" / f"{run.run_id}.jsonl"
            try:
                report = spark_jobs.submit(SUPPLIER_STATS.job.source, [
                    "--source", orders_table, "--target", stats_table, "--day", context.partition_key],
                    log=context.log, extra_conf=run.spark_conf(spark_events))
            except BaseException as error:
                run.take_spark_events(spark_events, ended_by=error)  # Spark's own events, even from a failed job
                raise
            run.take_spark_events(spark_events)
            run.complete(OutputStatistics(rows=report["rows_written"], bytes=report["bytes_written"], files=report["files_written"]),
                         "CREATE" if report["table_created"] else "OVERWRITE",
                         version=DatasetVersion(str(report["snapshot_id"]), report["schema_id"]),
                         quality=report["quality"])
        return dg.MaterializeResult(metadata={
            **job_metadata(SUPPLIER_STATS, report),
            "day": report["day"],
            "snapshot_id": str(report["snapshot_id"]),
            "table_schema_id": report["schema_id"],
            "files_written": report["files_written"],
            "bytes_written": report["bytes_written"],
            "table_created": report["table_created"],
            "totals": dg.MetadataValue.json(report["totals"]),
            **table_quality_metadata(report),
        })

    supplier_stats_job = dg.define_asset_job("supplier_stats_job", selection=[asset_key(SUPPLIER_STATS)])

    @dg.asset_sensor(asset_key=asset_key(LAKEHOUSE_ORDERS), job=supplier_stats_job, minimum_interval_seconds=30,
                     default_status=dg.DefaultSensorStatus.RUNNING,
                     description="A new `lakehouse/orders` materialization requests `supplier_stats` for each day it touched.")
    def supplier_stats_on_new_orders(context: dg.SensorEvaluationContext, asset_event: dg.EventLogEntry):
        metadata = asset_event.asset_materialization.metadata
        held = metadata.get("days_held_back")
        if held and held.value:
            yield dg.SkipReason(f"supplier_stats held back for {', '.join(held.value)}: check {SCHEMA_CHECK} failed")
        days = metadata.get("days")
        for day in (days.value if days else []):
            # One request per (materialization, day): a re-evaluation never asks twice.
            yield dg.RunRequest(run_key=f"{asset_event.run_id}:{asset_event.timestamp}:{day}", partition_key=day)

    @dg.asset_check(**check_arguments(ORDERS_RECONCILE))
    def orders_reconcile_with_topic(context: dg.AssetCheckExecutionContext, pyspark: PySparkResource,
                                    kafka: KafkaResource, lineage: LineageResource) -> dg.AssetCheckResult:
        with lineage.check_run(context, ORDERS_RECONCILE) as run:
            event = context.instance.get_latest_materialization_event(asset_key(LAKEHOUSE_ORDERS))
            consumed = event.asset_materialization.metadata["records_consumed"].value if event else 0
            rows = pyspark.spark_session.table(orders_table).count()
            dead = sum(kafka.end_offsets(kafka.lakehouse.settings().dead_letter_topic).values())
            return run.result([Assertion(
                ORDERS_RECONCILE.name, "row_count", rows + dead == consumed,
                "rows in the table plus dead letters equal the topic records the ingestion consumed",
                expected=str(consumed), actual=str(rows + dead))],
                metadata={"table_rows": rows, "dead_letters": dead, "consumed_offsets": consumed})

    @dg.asset_check(**check_arguments(ORDERS_VALUES))
    def orders_values_in_range(context: dg.AssetCheckExecutionContext, pyspark: PySparkResource,
                               lineage: LineageResource) -> dg.AssetCheckResult:
        with lineage.check_run(context, ORDERS_VALUES) as run:
            failing = pyspark.spark_session.sql("SELECT " + ", ".join(
                f"count_if({condition}) AS {column}" for column, (_, condition) in VALUE_TESTS.items())
                + f" FROM {orders_table}").collect()[0].asDict()
            return run.result([Assertion(
                ORDERS_VALUES.name, kind, failing[column] == 0, f"no row where {condition}", column=column,
                expected="0", actual=str(failing[column]), sql=f"SELECT count_if({condition}) FROM {orders_table}")
                for column, (kind, condition) in VALUE_TESTS.items()],
                metadata={f"{column}_failing": count for column, count in failing.items()})

    return {
        "assets": [lakehouse_orders, supplier_stats],
        "asset_checks": [orders_reconcile_with_topic, orders_values_in_range],
        "jobs": [supplier_stats_job],
        "sensors": [supplier_stats_on_new_orders],
    }

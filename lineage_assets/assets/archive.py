"""The raw archive of `orders` in S3, and its reconciliation with the topic."""

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
from lineage_assets.catalog import ARCHIVE, CHECKS
from lineage_assets.lineage.events import Assertion, OutputStatistics, orders_read
from lineage_assets.resources.kafka import KafkaResource
from lineage_assets.resources.lineage import LineageResource
from lineage_assets.resources.spark_jobs import SparkJobsResource
from lineage_assets.settings import Settings


def archive_location(settings: Settings) -> str:
    identity = ARCHIVE.identity(settings)
    return f"{identity.namespace}/{identity.name}"


def archive_job_arguments(kafka: KafkaResource, spark_jobs: SparkJobsResource) -> list[str]:
    return [*orders_source_arguments(kafka, spark_jobs, ARCHIVE), "--path", archive_location(kafka.lakehouse.settings())]


ARCHIVE_RECONCILE = CHECKS["archive_reconciles_with_topic"]


def build_archive_assets(settings: Settings) -> list:
    @dg.asset(**asset_spec_arguments(ARCHIVE, settings, "archive"))
    def orders_archive(context: dg.AssetExecutionContext, kafka: KafkaResource, spark_jobs: SparkJobsResource,
                       lineage: LineageResource) -> dg.MaterializeResult:
        """Archive every new record of `orders` (Spark Structured Streaming, catch-up run)."""
        settings = kafka.lakehouse.settings()
        ensure_not_deployed(ARCHIVE, kafka)
        with lineage.asset_run(context, ARCHIVE) as run:
            report = spark_jobs.submit(ARCHIVE.job.source, archive_job_arguments(kafka, spark_jobs), log=context.log)
            run.complete(OutputStatistics(rows=report["rows_written"], bytes=report["bytes_written"], files=report["files_written"]),
                         "CREATE" if report["files_total"] == report["files_written"] and report["files_written"] else None,
                         quality=report["quality"], reads=(orders_read(settings, report.get("schema_versions")),))
        return dg.MaterializeResult(metadata={
            **job_metadata(ARCHIVE, report),
            "files_written": report["files_written"],
            "bytes_written": report["bytes_written"],
            "files_total": report["files_total"],
            "records_consumed": consumed_records(report),
            "path": archive_location(settings),
            "quality": dg.MetadataValue.json(report["quality"]),  # of the records this run archived
        })

    @dg.asset_check(**check_arguments(ARCHIVE_RECONCILE))
    def archive_reconciles_with_topic(context: dg.AssetCheckExecutionContext, pyspark: PySparkResource,
                                      lineage: LineageResource) -> dg.AssetCheckResult:
        with lineage.check_run(context, ARCHIVE_RECONCILE) as run:
            event = context.instance.get_latest_materialization_event(asset_key(ARCHIVE))
            consumed = event.asset_materialization.metadata["records_consumed"].value if event else 0
            # Reading the sink's folder through Spark honours its commit log: only committed files count.
            archived = pyspark.spark_session.read.json(archive_location(settings)).select("topic", "partition", "offset")
            rows = archived.count()
            distinct = archived.distinct().count()
            return run.result([
                Assertion(ARCHIVE_RECONCILE.name, "row_count", rows == consumed,
                          "records archived equal the topic offsets consumed", expected=str(consumed), actual=str(rows)),
                Assertion(ARCHIVE_RECONCILE.name, "unique", distinct == rows,
                          "no (topic, partition, offset) archived twice", expected="0", actual=str(rows - distinct)),
            ], metadata={"archived_records": rows, "distinct_offsets": distinct, "consumed_offsets": consumed})

    return [orders_archive, archive_reconciles_with_topic]

"""The live per-supplier statistics topic, fed by a streaming window job."""

import dagster as dg

from lineage_assets.assets.common import (
    asset_spec_arguments,
    ensure_not_deployed,
    job_metadata,
    orders_source_arguments,
)
from lineage_assets.catalog import SUPPLIER_STATS_LIVE
from lineage_assets.lineage.events import OutputStatistics, orders_read
from lineage_assets.resources.kafka import KafkaResource
from lineage_assets.resources.lineage import LineageResource
from lineage_assets.resources.spark_jobs import SparkJobsResource
from lineage_assets.settings import Settings


def live_stats_job_arguments(kafka: KafkaResource, spark_jobs: SparkJobsResource) -> list[str]:
    return [*orders_source_arguments(kafka, spark_jobs, SUPPLIER_STATS_LIVE),
            "--output-topic", kafka.lakehouse.settings().supplier_stats_topic]


def build_live_stats_assets(settings: Settings) -> list:
    @dg.asset(**asset_spec_arguments(SUPPLIER_STATS_LIVE, settings, "live_stats"))
    def supplier_stats_live(context: dg.AssetExecutionContext, kafka: KafkaResource,
                            spark_jobs: SparkJobsResource, lineage: LineageResource) -> dg.MaterializeResult:
        """Aggregate new orders into 5 s windows and publish the windows the watermark has closed."""
        settings = kafka.lakehouse.settings()
        ensure_not_deployed(SUPPLIER_STATS_LIVE, kafka)
        with lineage.asset_run(context, SUPPLIER_STATS_LIVE) as run:
            created = kafka.ensure_topics(settings.supplier_stats_topic)
            report = spark_jobs.submit(SUPPLIER_STATS_LIVE.job.source, live_stats_job_arguments(kafka, spark_jobs),
                                       log=context.log)
            run.complete(OutputStatistics(rows=report["windows_written"]), "CREATE" if created else None,
                         reads=(orders_read(settings, report.get("schema_versions")),))
        return dg.MaterializeResult(metadata={
            **job_metadata(SUPPLIER_STATS_LIVE, report),
            "rows_out": report["windows_written"],
            "kafka/output_end_offsets": dg.MetadataValue.json(kafka.end_offsets(settings.supplier_stats_topic)),
        })

    return [supplier_stats_live]

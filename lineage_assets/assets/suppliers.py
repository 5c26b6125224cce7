"""The supplier dimension: its compacted topic and generator, and its Iceberg table (each supplier's
current state). The revenue joined with it is a ``DailyTable`` (``tables.py``)."""

import datetime as dt

import dagster as dg

from lineage_assets.assets.common import (
    Outcome,
    StreamingRun,
    asset_spec_arguments,
    generator_run,
    streaming_asset,
    topic_read_by,
)
from lineage_assets.assets.lakehouse import table_metadata
from lineage_assets.datasets import (
    LAKEHOUSE_SUPPLIERS,
    SUPPLIERS,
    suppliers_avro_schema_json,
)
from lineage_assets.generator import SuppliersConfig as GeneratorSuppliersConfig
from lineage_assets.generator import generate_suppliers, produce_suppliers
from lineage_assets.job_specs import (
    SuppliersIngestionReport,
    suppliers_ingestion_job,
)
from lineage_assets.lineage.run_facts import OutputStatistics, RunFacts, snapshot_written
from lineage_assets.resources.kafka import KafkaResource
from lineage_assets.resources.lineage import LineageResource
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.source_schemas import dead_letter_topic_of


class SuppliersConfig(dg.Config):
    seed: int = 7
    start: str | None = None  # ISO time (UTC) the changes start at; default: so that the last is now
    span_seconds: float = 200.0
    changes: int = 3
    bad: int = 0  # records without a region, which the ingestion dead-letters

    def generator(self) -> GeneratorSuppliersConfig:
        return GeneratorSuppliersConfig(
            seed=self.seed,
            start=dt.datetime.fromisoformat(self.start) if self.start else None,
            span_seconds=self.span_seconds,
            changes=self.changes,
            bad=self.bad,
        )


@dg.asset(**asset_spec_arguments(SUPPLIERS, "ingest"))
def suppliers(
    context: dg.AssetExecutionContext,
    config: SuppliersConfig,
    environment: SettingsResource,
    kafka: KafkaResource,
    lineage: LineageResource,
) -> dg.MaterializeResult:
    """Ensure the compacted topic and its value schema exist, then produce every supplier's state and its changes."""
    settings = environment.settings
    return generator_run(
        context,
        SUPPLIERS,
        settings.suppliers_topic,
        suppliers_avro_schema_json(),
        kafka,
        lineage,
        kafka.ensure_suppliers_topics,
        lambda: produce_suppliers(generate_suppliers(config.generator()), settings, progress=context.log.info),
    )


def ingested_suppliers(run: StreamingRun[SuppliersIngestionReport]) -> Outcome:
    """What a catch-up run merged into the dimension's table, and the dead letters it sent."""
    report, settings = run.report, run.settings
    if report.dead_letters:
        dead_letter_topic = dead_letter_topic_of(settings.suppliers_topic)
        run.context.log.warning(
            f"{report.dead_letters} supplier records dead-lettered to {dead_letter_topic}: {report.dead_letter_reasons}"
        )
    return Outcome(
        RunFacts(
            OutputStatistics(rows=report.rows_written),
            "CREATE" if report.table_created else None,
            version=snapshot_written(report.snapshot_id, report.schema_id, report.parent_snapshot_id),
            quality=report.quality,
            reads=(topic_read_by(SUPPLIERS, settings.suppliers_topic, report),),
        ),
        metadata={
            "dead_letters": report.dead_letters,
            "dead_letter_reasons": dg.MetadataValue.json(report.dead_letter_reasons),
            "table_rows": report.table_rows,
            "table_created": report.table_created,
            "records_consumed": report.consumed_records,
            **table_metadata(report.snapshot_id, report.schema_id, report.quality),
        },
    )


lakehouse_suppliers = streaming_asset(
    LAKEHOUSE_SUPPLIERS,
    suppliers_ingestion_job,
    "lakehouse",
    ingested_suppliers,
    topics=lambda settings: (settings.suppliers_topic, dead_letter_topic_of(settings.suppliers_topic)),
)

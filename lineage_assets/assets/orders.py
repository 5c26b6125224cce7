"""The `orders` topic and its generator (the reference's mock source connector)."""

import datetime as dt
import time

import dagster as dg

from lineage_assets.assets.common import asset_spec_arguments
from lineage_assets.datasets import ORDERS, orders_avro_schema_json
from lineage_assets.generator import GeneratorConfig, generate_orders, produce_orders
from lineage_assets.lineage.run_facts import DatasetVersion, OffsetRange, OutputStatistics, RunFacts
from lineage_assets.preflight import require_services
from lineage_assets.resources.kafka import KafkaResource
from lineage_assets.resources.lineage import LineageResource
from lineage_assets.resources.settings import SettingsResource


class OrdersConfig(dg.Config):
    count: int = 200
    seed: int = 7
    start: str | None = None  # ISO time of the first order (UTC); default: so that the last is now
    interval_seconds: float = 1.0
    late_fraction: float = 0.0
    bad_fraction: float = 0.0

    def generator(self) -> GeneratorConfig:
        start = dt.datetime.fromisoformat(self.start) if self.start else None
        return GeneratorConfig(
            count=self.count,
            seed=self.seed,
            start=start,
            interval_seconds=self.interval_seconds,
            late_fraction=self.late_fraction,
            bad_fraction=self.bad_fraction,
        )


@dg.asset(**asset_spec_arguments(ORDERS, "ingest"))
def orders(
    context: dg.AssetExecutionContext,
    config: OrdersConfig,
    environment: SettingsResource,
    kafka: KafkaResource,
    lineage: LineageResource,
) -> dg.MaterializeResult:
    """Ensure the topics and the value schema exist, then produce ``count`` generated orders."""
    started = time.monotonic()
    settings = environment.settings
    require_services(settings)
    with lineage.asset_run(context, ORDERS) as run:
        created = kafka.ensure_orders_topics()
        schema = kafka.register_value_schema(settings.orders_topic, orders_avro_schema_json())
        generated = list(generate_orders(config.generator()))
        report = produce_orders(generated, settings, progress=context.log.info)
        run.complete(
            RunFacts(
                OutputStatistics(rows=report.produced),
                "CREATE" if settings.orders_topic in created else None,
                version=DatasetVersion(f"{schema.subject}:{schema.version}"),
                offsets=tuple(OffsetRange(p, first, after) for p, (first, after) in report.offsets.items()),
            )
        )
    context.log.info(f"produced {report.produced} orders to {settings.orders_topic}: {report.by_kind}")
    return dg.MaterializeResult(
        metadata={
            "rows_out": report.produced,
            "records_by_kind": dg.MetadataValue.json(report.by_kind),
            "schema_id": schema.schema_id,
            "schema_version": schema.version,
            "topics_created": dg.MetadataValue.json(created),
            "kafka/end_offsets": dg.MetadataValue.json(
                {settings.orders_topic: kafka.end_offsets(settings.orders_topic)}
            ),
            "first_sent_at": report.first_sent_at or "",
            "last_sent_at": report.last_sent_at or "",
            "duration_seconds": round(time.monotonic() - started, 3),
        }
    )

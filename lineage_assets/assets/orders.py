"""The `orders` topic and its generator (the reference's mock source connector)."""

import datetime as dt

import dagster as dg

from lineage_assets.assets.common import asset_spec_arguments, generator_run
from lineage_assets.datasets import ORDERS, orders_avro_schema_json
from lineage_assets.generator import GeneratorConfig, generate_orders, produce_orders
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
    settings = environment.settings
    return generator_run(
        context,
        ORDERS,
        settings.orders_topic,
        orders_avro_schema_json(),
        kafka,
        lineage,
        kafka.ensure_orders_topics,
        lambda: produce_orders(list(generate_orders(config.generator())), settings, progress=context.log.info),
    )

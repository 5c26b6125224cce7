"""Asset unit tests: an asset invoked directly with `build_asset_context` against the test stack."""

from __future__ import annotations

import dagster as dg

from lineage_assets.assets.orders import OrdersConfig, orders
from lineage_assets.datasets import ORDERS
from lineage_assets.lineage.emitter import emitter_for
from lineage_assets.testing import build_asset_context, module_pipeline, resources_for

settings = module_pipeline("asset-unit")  # its orders beside the shared pipeline's, on another worker


def test_orders_asset_produces_the_configured_orders_and_reports_them(stack, settings):
    resources = resources_for(settings)
    topic_before = (
        resources["kafka"].end_offsets(settings.orders_topic) if _topic_exists(resources, settings) else {0: 0}
    )

    with dg.instance_for_test() as instance:
        with build_asset_context(orders, settings, instance=instance) as context:
            result = orders(context, OrdersConfig(count=25, seed=3, bad_fraction=0.2))

    metadata = result.metadata
    assert metadata["rows_out"] == 25
    assert (
        sum(metadata["records_by_kind"].data.values()) == 25 and metadata["records_by_kind"].data.get("valid", 0) < 25
    )
    after = resources["kafka"].end_offsets(settings.orders_topic)
    assert sum(after.values()) - sum(topic_before.values()) == 25
    # Directly invoked, the asset still reports a complete lineage run, and ends its parent run.
    recorded = emitter_for(settings).events()
    direct = {
        e["run"]["runId"]
        for e in recorded
        if e["job"]["name"] == "dagster"
        and {"key": "dagster.job", "value": "direct_invocation", "source": "DAGSTER"}
        in e["run"]["facets"]["tags"]["tags"]
    }
    asset_run = [
        e
        for e in recorded
        if e["job"]["name"] == ORDERS.job.lineage_name and e["run"]["facets"]["parent"]["run"]["runId"] in direct
    ][-2:]
    assert [e["eventType"] for e in asset_run] == ["START", "COMPLETE"]
    parent_id = asset_run[-1]["run"]["facets"]["parent"]["run"]["runId"]
    assert [e["eventType"] for e in recorded if e["run"]["runId"] == parent_id] == ["START", "COMPLETE"]


def _topic_exists(resources, settings) -> bool:
    from confluent_kafka.admin import AdminClient

    return (
        settings.orders_topic
        in AdminClient({"bootstrap.servers": settings.kafka_servers}).list_topics(timeout=10).topics
    )

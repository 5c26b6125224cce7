"""The asset sensor: a new `lakehouse/orders` materialization requests `supplier_stats` for its days."""

from __future__ import annotations

import dagster as dg

from lineage_assets.definitions import defs

ORDERS_TABLE = dg.AssetKey(["lakehouse", "orders"])
SUPPLIER_STATS = dg.AssetKey(["lakehouse", "supplier_stats"])


def evaluate(instance, cursor=None):
    sensor = defs.resolve_sensor_def("supplier_stats_on_new_orders")
    context = dg.build_sensor_context(instance=instance, cursor=cursor, definitions=defs)
    result = sensor.evaluate_tick(context)
    return result.run_requests, result.cursor


def test_requests_each_touched_day_once():
    with dg.instance_for_test() as instance:
        instance.report_runless_asset_event(
            dg.AssetMaterialization(
                ORDERS_TABLE, metadata={"days": dg.MetadataValue.json(["2026-11-20", "2026-11-21"])}
            )
        )
        requests, cursor = evaluate(instance)
        assert sorted(r.partition_key for r in requests) == ["2026-11-20", "2026-11-21"]
        assert defs.resolve_sensor_def("supplier_stats_on_new_orders").job_name == "supplier_stats_job"
        assert len({r.run_key for r in requests}) == 2

        again, cursor = evaluate(instance, cursor)
        assert again == []  # nothing new: no duplicate requests

        instance.report_runless_asset_event(
            dg.AssetMaterialization(ORDERS_TABLE, metadata={"days": dg.MetadataValue.json(["2026-11-21"])})
        )
        later, _ = evaluate(instance, cursor)
        assert [r.partition_key for r in later] == ["2026-11-21"]


def test_materialization_without_new_days_requests_nothing():
    with dg.instance_for_test() as instance:
        instance.report_runless_asset_event(
            dg.AssetMaterialization(ORDERS_TABLE, metadata={"days": dg.MetadataValue.json([])})
        )
        requests, _ = evaluate(instance)
        assert requests == []


def test_days_held_back_by_a_schema_drift_are_requested_once_the_replays_are_back():
    from lineage_assets.assets.lakehouse import Rebuild

    sensor = defs.resolve_sensor_def("supplier_stats_on_new_orders")
    with dg.instance_for_test() as instance:
        drift = Rebuild.after({}, ["2026-11-21"], incompatible=4, returned=0)
        instance.report_runless_asset_event(dg.AssetMaterialization(ORDERS_TABLE, metadata=drift.metadata))
        result = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, definitions=defs))
        assert result.run_requests == []
        assert "held back for 2026-11-21" in result.skip_message and "orders_schema_readable" in result.skip_message

        back = Rebuild.after(drift.values, [], incompatible=0, returned=4)
        instance.report_runless_asset_event(dg.AssetMaterialization(ORDERS_TABLE, metadata=back.metadata))
        requests, _ = evaluate(instance, result.cursor)
        assert [r.partition_key for r in requests] == ["2026-11-21"]


def test_a_day_built_since_the_orders_landed_is_not_requested_again():
    """The first `make dev` after `make demo`: its daemon's sensor meets the demo's ingestion, whose days
    the demo's pass has built since; only a day it left unbuilt is requested."""
    with dg.instance_for_test() as instance:
        days = dg.MetadataValue.json(["2026-11-20", "2026-11-21"])
        instance.report_runless_asset_event(dg.AssetMaterialization(ORDERS_TABLE, metadata={"days": days}))
        instance.report_runless_asset_event(dg.AssetMaterialization(SUPPLIER_STATS, partition="2026-11-20"))
        sensor = defs.resolve_sensor_def("supplier_stats_on_new_orders")
        result = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, definitions=defs))
        assert [r.partition_key for r in result.run_requests] == ["2026-11-21"]

        instance.report_runless_asset_event(dg.AssetMaterialization(SUPPLIER_STATS, partition="2026-11-21"))
        result = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, definitions=defs))
        assert result.run_requests == []
        assert result.skip_message == "supplier_stats built since these orders landed, for 2026-11-20, 2026-11-21"

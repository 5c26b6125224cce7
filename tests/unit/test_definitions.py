"""The whole Definitions loads, and its asset graph is the reference's."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import dagster as dg
import pytest

from lineage_assets.datasets import CHECKS, DATASETS
from lineage_assets.definitions import build_definitions, defs
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.settings import PROJECT_ROOT, SettingsError
from lineage_assets.settings_environment import settings_from_env


def test_definitions_load_with_every_asset_check_sensor_and_job():
    graph = defs.resolve_asset_graph()
    keys = {key.to_user_string() for key in graph.get_all_asset_keys()}
    assert keys == set(DATASETS)
    assert {
        key.to_user_string(): sorted(p.to_user_string() for p in graph.get(key).parent_keys)
        for key in graph.get_all_asset_keys()
    } == {
        "orders": [],
        "orders_archive": ["orders"],
        "supplier_stats_live": ["orders"],
        "lakehouse/orders": ["orders"],
        "lakehouse/supplier_stats": ["lakehouse/orders"],
        "suppliers": [],
        "lakehouse/suppliers": ["suppliers"],
        "lakehouse/supplier_revenue": ["lakehouse/supplier_stats", "lakehouse/suppliers"],
    }
    assert defs.resolve_sensor_def("supplier_stats_on_new_orders")
    assert defs.resolve_job_def("supplier_stats_job")
    assert {key.name for key in graph.asset_check_keys} == {
        "archive_reconciles_with_topic",
        "orders_reconcile_with_topic",
        "orders_values_in_range",
        "orders_schema_readable",
        "lineage_matches_catalog",
        "revenue_reconciles_with_supplier_stats",
        "region_and_tier_present",
    }
    schema_check = next(key for key in graph.asset_check_keys if key.name == "orders_schema_readable")
    assert graph.get_check_spec(schema_check).blocking  # a drifted source stops supplier_stats in the same run
    # Each Spark-written asset holds its run's lineage against the design; blocking where others build on it.
    lineage_checks = {
        key.asset_key.to_user_string(): graph.get_check_spec(key).blocking
        for key in graph.asset_check_keys
        if key.name == "lineage_matches_catalog"
    }
    assert lineage_checks == {
        "orders_archive": False,
        "supplier_stats_live": False,
        "lakehouse/orders": True,
        "lakehouse/supplier_stats": True,
        "lakehouse/suppliers": True,
        "lakehouse/supplier_revenue": False,
    }


def test_every_asset_declares_column_schema_and_lineage_from_the_catalog():
    for key, dataset in DATASETS.items():
        spec = defs.resolve_assets_def(dg.AssetKey(dataset.asset_key_path)).specs_by_key[
            dg.AssetKey(dataset.asset_key_path)
        ]
        schema = spec.metadata["dagster/column_schema"]
        assert [c.name for c in schema.columns] == [c.name for c in dataset.columns], key
        if dataset.upstream:
            lineage = spec.metadata["dagster/column_lineage"]
            # The expectation, each column's input fields (dataset-wide ones too); a column of none is left out.
            assert {
                column: {(dep.asset_key.to_user_string(), dep.column_name) for dep in deps}
                for column, deps in lineage.deps_by_column.items()
            } == {
                column: {(source.dataset, source.column) for source in sources}
                for column, sources in dataset.expected_lineage.items()
                if sources
            }, key
    total_price = (
        next(iter(defs.resolve_assets_def(dg.AssetKey(["lakehouse", "supplier_stats"])).specs))
        .metadata["dagster/column_lineage"]
        .deps_by_column["total_price"]
    )
    assert dg.TableColumnDep(asset_key=dg.AssetKey(["lakehouse", "orders"]), column_name="price") in total_price


def test_an_asset_page_says_what_depends_on_each_of_its_columns():
    def impact_text(*path: str) -> str | None:
        metadata = defs.resolve_assets_def(dg.AssetKey(list(path))).specs_by_key[dg.AssetKey(list(path))].metadata
        return metadata["lineage/impact"].value if "lineage/impact" in metadata else None

    orders = impact_text("orders")
    price = orders[orders.index("impact of orders.price") : orders.index("impact of orders.item")]
    assert (
        "lakehouse/orders.price  (DIRECT/TRANSFORMATION, INDIRECT/FILTER: try_cast(orders.price as decimal(10,2))"
        in price
    )
    assert "lakehouse/supplier_stats.total_price" in price and "supplier_stats_live.total_price" in price
    assert "latest run" not in orders  # declared lineage, not a run's
    assert "asset checks: orders_values_in_range" in price  # it tests lakehouse/orders.price
    assert orders.rstrip("`\n").endswith(
        "Dagster assets downstream: lakehouse/orders, lakehouse/supplier_revenue, lakehouse/supplier_stats, "
        "orders_archive, supplier_stats_live\n"
        "Asset checks of it and downstream: archive_reconciles_with_topic, "
        "orders_reconcile_with_topic, orders_values_in_range"
    )
    assert "lakehouse/supplier_revenue.revenue" in impact_text("lakehouse", "supplier_stats")
    assert impact_text("lakehouse", "supplier_revenue") is None  # nothing depends on it


def test_dagster_validates_the_workspace(tmp_path):
    # An instance of its own: the checkout's .env names the development instance, whose PostgreSQL
    # may be stopped, and validating the workspace is no reason to open it.
    result = subprocess.run(
        [sys.executable, "-m", "dagster", "definitions", "validate", "-w", "workspace.yaml"],
        cwd=PROJECT_ROOT,
        env={**os.environ, "DAGSTER_HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_sensor_runs_by_default_so_dagster_dev_keeps_lineage_truthful():
    # A stopped dead-run sensor would leave a died run's lineage RUNNING; a stopped asset sensor would
    # leave supplier_stats stale under continuous ingestion; a stopped design sensor would leave
    # Marquez without the graph until each asset first runs.
    sensors = {sensor.name: sensor.default_status for sensor in defs.sensors}
    assert len(sensors) == 4 and {"publish_lineage_design", "dead_dagster_run_lineage"} <= set(sensors)
    assert set(sensors.values()) == {dg.DefaultSensorStatus.RUNNING}, sensors


def test_the_lakehouse_upkeep_is_scheduled_hourly_and_on_by_default():
    # Stopped, a continuous deployment's snapshots would pile up and slow every commit of the table.
    (schedule,) = defs.schedules
    assert (schedule.job_name, schedule.cron_schedule) == ("lakehouse_maintenance", "23 * * * *")
    assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING


def test_the_hourly_upkeep_is_skipped_while_the_last_one_still_runs():
    (schedule,) = defs.schedules
    job = defs.resolve_job_def("lakehouse_maintenance")
    # Dagster's run monitoring cancels one past it: a run whose process died holds no hour back for long.
    assert job.tags["dagster/max_runtime"] == str(6 * 3600)
    with dg.instance_for_test() as instance:
        assert isinstance(schedule.evaluate_tick(dg.build_schedule_context(instance)).run_requests[0], dg.RunRequest)
        run = instance.create_run_for_job(job, status=dg.DagsterRunStatus.STARTED)  # as its process marks it
        skipped = schedule.evaluate_tick(dg.build_schedule_context(instance))
        assert not skipped.run_requests
        assert skipped.skip_message == (
            f"lakehouse_maintenance run {run.run_id} has not ended (STARTED): this upkeep skipped"
        )
        instance.report_run_failed(instance.get_run_by_id(run.run_id))
        assert schedule.evaluate_tick(dg.build_schedule_context(instance)).run_requests


def test_the_definitions_and_every_resource_follow_one_environment():
    environment = SettingsResource(
        overrides={"LINEAGE_ASSETS_ORDERS_TOPIC": "sales", "LINEAGE_ASSETS_KAFKA_BOOTSTRAP": "k1:9092"}
    )
    definitions = build_definitions(environment)
    spec = definitions.resolve_assets_def(dg.AssetKey(["orders"])).specs_by_key[dg.AssetKey(["orders"])]
    assert (spec.metadata["openlineage/namespace"], spec.metadata["openlineage/name"]) == ("kafka://k1:9092", "sales")
    resources = definitions.resources
    assert resources["environment"] is environment
    for name in ("kafka", "spark_jobs", "lineage"):
        assert resources[name].environment.settings == environment.settings, name
    # Every area's assets, checks, sensors and jobs, merged once.
    assert {check.name for check in definitions.resolve_asset_graph().asset_check_keys} == {
        *CHECKS,
        "orders_schema_readable",
        "lineage_matches_catalog",
        "revenue_reconciles_with_supplier_stats",
        "region_and_tier_present",
    }
    assert {job.name for job in definitions.jobs} == {
        "supplier_stats_job",
        "streaming_deployments",
        "lakehouse_maintenance",
    }


def test_the_upkeep_runs_on_the_settings_cron_and_a_cron_dagster_refuses_names_its_setting():
    settings = settings_from_env({})
    every_ten = build_definitions(SettingsResource.of(dataclasses.replace(settings, upkeep_schedule="*/10 * * * *")))
    assert every_ten.resolve_schedule_def("lakehouse_maintenance_schedule").cron_schedule == "*/10 * * * *"
    with pytest.raises(SettingsError, match=r"^LINEAGE_ASSETS_UPKEEP_SCHEDULE='61 \* \* \* \*': .*invalid cron"):
        build_definitions(SettingsResource.of(dataclasses.replace(settings, upkeep_schedule="61 * * * *")))

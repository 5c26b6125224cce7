"""The lineage the end-to-end run emitted, read as data from the project's event log."""

from __future__ import annotations

import dagster as dg
import pytest

from lineage_assets.catalog import DATASETS, LAKEHOUSE_ORDERS, ORDERS, SUPPLIER_STATS
from lineage_assets.definitions import build_definitions
from lineage_assets.lineage.check import check
from lineage_assets.lineage.events import PRODUCER
from lineage_assets.lineage.validation import validate_event
from lineage_assets.resources.lakehouse import LakehouseResource
from lineage_assets.resources.lineage import emitter_for
from lineage_assets.settings import PROJECT_ROOT

SPEC = PROJECT_ROOT.parent / "shared" / "openlineage-spec"


@pytest.fixture(scope="module")
def events(runs, settings):
    return emitter_for(settings).events()


def runs_of(events, job_name):
    """The project's own runs of a job (not the Spark agent's)."""
    by_run = {}
    for event in events:
        if event["job"]["name"] == job_name and event["producer"] == PRODUCER:
            by_run.setdefault(event["run"]["runId"], []).append(event)
    return by_run


@pytest.mark.skipif(not SPEC.is_dir(), reason=f"the official schemas are expected in {SPEC}")
def test_every_emitted_event_validates_against_the_official_schemas(events):
    assert len(events) > 20
    problems = {f"{e['job']['name']} {e['eventType']}": validate_event(e, SPEC) for e in events}
    assert {k: v for k, v in problems.items() if v} == {}


def test_each_materialization_is_one_run_from_start_to_one_terminal_event(events):
    for dataset in DATASETS.values():
        runs = runs_of(events, dataset.job.name)
        assert runs, dataset.key
        for run_events in runs.values():
            kinds = [e["eventType"] for e in run_events]
            assert kinds == ["START", "COMPLETE"], (dataset.key, kinds)
            assert run_events[0]["eventTime"] <= run_events[1]["eventTime"]


def test_asset_runs_nest_under_their_dagster_run(events):
    for run_events in runs_of(events, SUPPLIER_STATS.job.name).values():
        parent = run_events[0]["run"]["facets"]["parent"]
        assert parent["job"]["name"].startswith("dagster.")
        assert parent["root"]["run"]["runId"] == parent["run"]["runId"]


def test_spark_agent_lineage_nests_under_the_asset_run_with_the_same_datasets(events, settings):
    asset_runs = set(runs_of(events, SUPPLIER_STATS.job.name))
    agent = [e for e in events if e.get("producer", "").startswith("https://github.com/OpenLineage/OpenLineage")]
    assert agent, "the openlineage-spark agent sent nothing"
    application = [e for e in agent if (e["run"]["facets"].get("parent") or {}).get("run", {}).get("runId") in asset_runs]
    assert application, "no Spark event has an asset run as parent"
    nested_run_ids = {e["run"]["runId"] for e in application}
    actions = [e for e in agent if (e["run"]["facets"].get("parent") or {}).get("run", {}).get("runId") in nested_run_ids | asset_runs]
    written = {(d["namespace"], d["name"]) for e in actions for d in e.get("outputs", [])}
    read = {(d["namespace"], d["name"]) for e in actions for d in e.get("inputs", [])}
    stats, orders = SUPPLIER_STATS.identity(settings), LAKEHOUSE_ORDERS.identity(settings)
    assert written == {(stats.namespace, stats.name)}
    # Overwriting by a filter reads the target too; nothing outside the asset's datasets is named.
    assert (orders.namespace, orders.name) in read and read <= {(orders.namespace, orders.name), (stats.namespace, stats.name)}
    assert {e["job"]["name"] for e in application} == {"supplier_stats_spark"}
    symlinks = [d["facets"]["symlinks"]["identifiers"] for e in actions for d in e.get("outputs", []) if "symlinks" in d.get("facets", {})]
    assert symlinks and all(s == [{"namespace": stats.symlinks[0].namespace, "name": stats.symlinks[0].name, "type": "TABLE"}]
                            for s in symlinks)


def test_lineage_check_passes_on_the_run(events, settings):
    assert check(events, settings) == []


def test_lineage_check_reports_a_misnamed_dataset(events, settings):
    orders = ORDERS.identity(settings)
    misnamed = []
    for event in events:
        if event["job"]["name"] == LAKEHOUSE_ORDERS.job.name:
            event = {**event, "inputs": [{**d, "namespace": "kafka://localhost:19092"} if d["name"] == orders.name else d
                                         for d in event.get("inputs", [])]}
        misnamed.append(event)
    gaps = check(misnamed, settings)
    assert f"missing edge: dataset {orders.namespace}:orders (asset orders) -> job {settings.lineage_namespace}/iceberg-ingestion" in gaps
    assert any(g.startswith("orphan dataset: kafka://localhost:19092:orders") for g in gaps)


def test_a_failing_materialization_emits_fail_with_the_error(stack, settings, instance):
    broken = LakehouseResource(overrides={**settings.as_environment(), "LINEAGE_ASSETS_REGISTRY_URL": "http://127.0.0.1:9/apis"})
    definitions = build_definitions(broken)
    result = dg.materialize([*definitions.assets], selection=[dg.AssetKey("orders")], resources=definitions.resources,
                            instance=instance, raise_on_error=False, run_config={"ops": {"orders": {"config": {"count": 1}}}})
    assert not result.success
    failed = [e for e in emitter_for(settings).events() if e["job"]["name"] == ORDERS.job.name and e["eventType"] == "FAIL"]
    assert failed
    error = failed[-1]["run"]["facets"]["errorMessage"]
    assert "127.0.0.1:9" in error["message"] + error["stackTrace"]
    kinds = [e["eventType"] for e in emitter_for(settings).events() if e["run"]["runId"] == failed[-1]["run"]["runId"]]
    assert kinds == ["START", "FAIL"]

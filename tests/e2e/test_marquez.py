"""The lineage as the user sees it in Marquez (the real server, in the test stack) after the end-to-end run."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import urllib.request
from collections import Counter

import dagster as dg
import pytest
from openlineage.client.uuid import generate_new_uuid

from lineage_assets.assets.run_lineage import dagster_run_of
from lineage_assets.datasets import CHECKS, DATASETS, LAKEHOUSE_ORDERS, ORCHESTRATOR_JOB, ORDERS, SUPPLIER_STATS
from lineage_assets.definitions import build_definitions, publish_definitions
from lineage_assets.instance import dagster_environment, prepare_dagster_home
from lineage_assets.lineage.check import check_marquez, check_marquez_with_design, retire
from lineage_assets.lineage.emitter import emitter_for
from lineage_assets.lineage.event_log import file_lock
from lineage_assets.lineage.facets import PRODUCER
from lineage_assets.lineage.marquez import MarquezApi, dataset_node, lineage_nodes
from lineage_assets.lineage.run_datasets import column_lineage_facet
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.settings_environment import as_environment
from lineage_assets.stack.supervisor import Supervisor
from lineage_assets.testing import pipeline_of_its_own
from tests.conftest import wait_for
from tests.e2e.conftest import DELIVERY_TIMEOUT_S
from tests.marquez_graph import dataset_names, job_node
from tests.suite import SHARED_PIPELINE

pytestmark = pytest.mark.xdist_group(SHARED_PIPELINE)  # the test stack's own topics, tables and lineage


def dagster_runs_of(settings, dagster_job: str) -> set[str]:
    """Lineage run ids of the Dagster runs of one Dagster job, from the event log."""
    return {
        e["run"]["runId"]
        for e in emitter_for(settings).events()
        if e["job"]["name"] == ORCHESTRATOR_JOB
        and {"key": "dagster.job", "value": dagster_job, "source": "DAGSTER"} in e["run"]["facets"]["tags"]["tags"]
    }


def asset_runs_under(settings, dataset, parents: set[str]) -> set[str]:
    return {
        e["run"]["runId"]
        for e in emitter_for(settings).events()
        if e["job"]["name"] == dataset.job.lineage_name
        and (e["run"]["facets"].get("parent") or {}).get("run", {}).get("runId") in parents
    }


def test_marquez_lineage_around_supplier_stats_is_exactly_the_asset_graph(marquez, settings):
    stats = SUPPLIER_STATS.identity(settings)
    jobs, datasets = lineage_nodes(marquez, stats.namespace, stats.name)
    # Every asset's job, and the job of every asset check (the run evaluated them all), reading what it checks.
    assert jobs == {
        f"{settings.lineage_namespace}/{name}"
        for name in [*(d.job.lineage_name for d in DATASETS.values()), *(c.lineage_name for c in CHECKS.values())]
    }
    assert datasets == {(d.identity(settings).namespace, d.identity(settings).name) for d in DATASETS.values()}


def test_marquez_lineage_from_the_orders_topic_reaches_supplier_stats_through_lakehouse_orders(marquez, settings):
    orders = ORDERS.identity(settings)
    edges = {
        (node["id"], edge["destination"])
        for node in marquez.lineage(orders.namespace, orders.name)["graph"]
        for edge in node["outEdges"]
    }

    def writer(dataset) -> str:
        return job_node(settings.lineage_namespace, dataset.job.lineage_name)

    def node(dataset) -> str:
        return dataset_node(*dataset.identity(settings).node)

    # The asset graph, drawn the way Marquez draws it: each job writes its asset and reads the asset's
    # upstreams; each check's job reads the asset it checks.
    assert edges == {(writer(d), node(d)) for d in DATASETS.values()} | {
        (node(DATASETS[upstream]), writer(d)) for d in DATASETS.values() for upstream in d.upstream
    } | {(node(DATASETS[c.dataset]), job_node(settings.lineage_namespace, c.lineage_name)) for c in CHECKS.values()}
    path = [
        node(ORDERS),
        writer(LAKEHOUSE_ORDERS),
        node(LAKEHOUSE_ORDERS),
        writer(SUPPLIER_STATS),
        node(SUPPLIER_STATS),
    ]
    assert set(zip(path, path[1:])) <= edges


def test_marquez_shows_no_gap_from_the_asset_graph_nor_from_the_design_published_before_the_runs(marquez, settings):
    assert check_marquez(marquez, settings) == []
    gaps, not_yet_run = check_marquez_with_design(marquez, settings, emitter_for(settings).log)
    assert gaps == [] and not_yet_run == []  # every designed job ran, as designed


def test_a_job_renamed_since_is_a_gap_until_retire_hides_it_in_marquez(marquez, settings):
    # Marquez holds a run of the batch job under its former name (a stack kept from before the rename).
    old = f"dagster.{SUPPLIER_STATS.job.former_names[0]}"
    run_id = str(generate_new_uuid())
    for state in ("START", "COMPLETE"):
        event = {
            "eventType": state,
            "eventTime": dt.datetime.now(dt.UTC).isoformat(),
            "producer": PRODUCER,
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            "run": {"runId": run_id},
            "job": {"namespace": settings.lineage_namespace, "name": old},
            "inputs": [],
            "outputs": [],
        }
        request = urllib.request.Request(
            f"{settings.marquez_api_url}/api/v1/lineage",
            data=json.dumps(event).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        urllib.request.urlopen(request, timeout=10).close()
    assert check_marquez(marquez, settings) == [
        f"retired job: {settings.lineage_namespace}/{old} (now {SUPPLIER_STATS.job.lineage_name}) is "
        f"still shown in Marquez; "
        "`lineage-assets lineage retire` hides it"
    ]
    assert retire(marquez, settings) == [old]
    assert old not in {job["name"] for job in marquez.jobs(settings.lineage_namespace)}
    assert marquez.run(run_id)["state"] == "COMPLETED"  # its history stays
    assert check_marquez(marquez, settings) == [] and retire(marquez, settings) == []


def test_marquez_column_lineage_leads_from_total_price_back_to_the_topic_price_with_each_transformation(
    marquez, settings
):
    stats, lakehouse, orders = (d.identity(settings) for d in (SUPPLIER_STATS, LAKEHOUSE_ORDERS, ORDERS))
    hops = {}
    for node in marquez.column_lineage(stats.namespace, stats.name, "total_price")["graph"]:
        data = node["data"]
        for source in data["inputFields"]:
            hops[(data["dataset"], data["field"], source["dataset"], source["field"])] = (
                source["transformationType"],
                source["transformationDescription"],
            )
    for dataset, column, upstream, source_column in (
        (SUPPLIER_STATS, "total_price", lakehouse, "price"),
        (LAKEHOUSE_ORDERS, "price", orders, "price"),
    ):
        declared = column_lineage_facet(dataset.expected_lineage, settings).fields[column]  # what the runs observed
        assert hops[(dataset.identity(settings).name, column, upstream.name, source_column)] == (
            declared.transformationType,
            declared.transformationDescription,
        )


def test_marquez_keeps_each_check_evaluation_as_a_completed_run_with_its_assertions_on_the_checked_dataset(
    runs, marquez, settings, instance
):
    """Each pass's evaluation, looked up by its own run id: a listing of recent events would miss it
    once other tests on the stack have emitted a few thousand more."""
    for check in CHECKS.values():
        checked = DATASETS[check.dataset].identity(settings)
        for run in runs:
            evaluations = [
                stored
                for run_id in run.run_ids
                if (stored := marquez.run(dagster_run_of(instance, run_id).check_run_id(check)))
            ]
            (evaluation,) = evaluations  # one per pipeline run
            assert evaluation["state"] == "COMPLETED", check.name
            assert evaluation["jobVersion"]["namespace"] == settings.lineage_namespace
            assert evaluation["jobVersion"]["name"] == check.lineage_name
            (read,) = evaluation["inputDatasetVersions"]
            assert (read["datasetVersionId"]["namespace"], read["datasetVersionId"]["name"]) == (
                checked.namespace,
                checked.name,
            )
            assertions = read["facets"]["dataQualityAssertions"]["assertions"]
            assert {a["name"] for a in assertions} == {check.name} and all(a["success"] for a in assertions)
            assert {a.get("column") for a in assertions} == (set(check.columns) or {None})


def test_the_same_asset_run_by_another_dagster_job_is_the_same_marquez_job_with_one_more_run(
    runs, marquez, settings, instance
):
    definitions = build_definitions(SettingsResource.of(settings))
    day = runs[0].days[0]
    assert (
        definitions.resolve_job_def("supplier_stats_job")
        .execute_in_process(instance=instance, partition_key=day)
        .success
    )
    assert emitter_for(settings).flush(timeout=DELIVERY_TIMEOUT_S)

    stats_jobs = [
        j["name"] for j in marquez.jobs(settings.lineage_namespace) if j["name"].endswith(SUPPLIER_STATS.job.name)
    ]
    assert stats_jobs == [SUPPLIER_STATS.job.lineage_name]
    marquez_runs = {
        r["id"]: r["state"] for r in marquez.runs(settings.lineage_namespace, SUPPLIER_STATS.job.lineage_name)
    }
    for dagster_job in ("__ephemeral_asset_job__", "supplier_stats_job"):
        asset_runs = asset_runs_under(settings, SUPPLIER_STATS, dagster_runs_of(settings, dagster_job))
        assert asset_runs and all(marquez_runs.get(run) == "COMPLETED" for run in asset_runs), dagster_job


def test_each_overwrite_of_supplier_stats_is_one_dataset_version_in_marquez(runs, marquez, settings, instance):
    """The day's table exists, so this run overwrites it: its START and COMPLETE describe one version,
    the dataset's current one, with what the run wrote (the version history holds no empty twin)."""
    definitions = build_definitions(SettingsResource.of(settings))
    before = asset_runs_under(settings, SUPPLIER_STATS, dagster_runs_of(settings, "supplier_stats_job"))
    assert (
        definitions.resolve_job_def("supplier_stats_job")
        .execute_in_process(instance=instance, partition_key=runs[0].days[0])
        .success
    )
    assert emitter_for(settings).flush(timeout=DELIVERY_TIMEOUT_S)
    (asset_run,) = asset_runs_under(settings, SUPPLIER_STATS, dagster_runs_of(settings, "supplier_stats_job")) - before

    identity = SUPPLIER_STATS.identity(settings)
    versions = [
        v
        for v in marquez.dataset_versions(identity.namespace, identity.name)
        if (v.get("createdByRun") or {}).get("id") == asset_run
    ]
    assert [v["lifecycleState"] for v in versions] == ["OVERWRITE"]
    assert {"dataQualityMetrics", "version", "columnLineage"} <= set(versions[0]["facets"])
    assert marquez.dataset(identity.namespace, identity.name)["currentVersion"] == versions[0]["version"]


def test_a_materialization_while_marquez_is_down_arrives_once_in_order_when_it_is_back(
    stack, settings, stack_of_its_own, request
):
    """On a Marquez of its own (and its PostgreSQL), the test stack's other servers shared: stopping the
    test stack's Marquez would fail whatever else reads it meanwhile."""
    shared = {
        "kafka_bootstrap": settings.kafka_servers,
        "registry_url": settings.schema_registry_url,
        "s3_endpoint": settings.s3_url,
        "catalog_url": settings.iceberg_catalog_url,
    }
    own_stack = stack_of_its_own("marquez-down", offset=10300, **shared)
    own = pipeline_of_its_own(own_stack.settings, "marquez-down")
    own_stack.up(["marquez"])
    publish_definitions(own)  # the design in Marquez already: `stack up` below has nothing new to emit
    marquez = MarquezApi.of(own)
    emitter = emitter_for(own)
    definitions = build_definitions(SettingsResource.of(own))
    own_stack.down(["marquez"])
    try:
        result = dg.materialize(
            [*definitions.assets],
            selection=[dg.AssetKey("orders")],
            resources=definitions.resources,
            instance=dg.DagsterInstance.ephemeral(),
            run_config={"ops": {"orders": {"config": {"count": 3}}}},
        )
        assert result.success
        assert emitter.pending() >= 4  # the Dagster run's and the asset run's START and COMPLETE wait in the log
    finally:
        emitter.stop_sender()  # gone, as a killed one is: no process is left to deliver what waits
        waiting = emitter.pending()
        up = subprocess.run(
            [sys.executable, "-m", "lineage_assets.cli", "stack", "up", "marquez"],
            env={**os.environ, **as_environment(own)},
            capture_output=True,
            text=True,
            timeout=300,
        )
    # Its state folder is the pipeline's (its lineage log's): the Marquez it started is stopped from there.
    request.addfinalizer(lambda: Supervisor(own).down(["marquez"]))
    assert up.returncode == 0, up.stdout + up.stderr
    assert f"lineage: a sender delivers the {waiting} events waiting in" in up.stdout
    # Delivered by the sender `stack up` started: nothing in this process sends meanwhile.
    wait_for(lambda: emitter.pending() == 0, DELIVERY_TIMEOUT_S, "the waiting events in Marquez")

    dagster_run = next(
        e
        for e in emitter.events()
        if e["job"]["name"] == ORCHESTRATOR_JOB
        and {"key": "dagster.run_id", "value": result.run_id, "source": "DAGSTER"} in e["run"]["facets"]["tags"]["tags"]
    )
    ours = {dagster_run["run"]["runId"], *asset_runs_under(own, ORDERS, {dagster_run["run"]["runId"]})}
    assert len(ours) == 2
    stored = Counter((e["run"]["runId"], e["eventType"]) for e in marquez.events() if e["run"]["runId"] in ours)
    assert stored == Counter({(run, kind): 1 for run in ours for kind in ("START", "COMPLETE")})
    # Marquez derives a run's state from the order events arrive in: a late START would read RUNNING again.
    assert {marquez.run(run)["state"] for run in ours} == {"COMPLETED"}


def test_dagster_asset_materialize_from_the_command_line_ends_its_runs_in_marquez(marquez, settings, tmp_path):
    home = prepare_dagster_home(settings, tmp_path / "dagster-home")
    command = [
        os.path.join(os.path.dirname(sys.executable), "dagster"),
        "asset",
        "materialize",
        "-m",
        "lineage_assets.definitions",
        "--select",
        "orders",
        "--config-json",
        json.dumps({"ops": {"orders": {"config": {"count": 2}}}}),
    ]
    done = subprocess.run(
        command,
        env=dagster_environment(settings, home),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    with dg.DagsterInstance.from_config(str(home)) as instance:
        run_id = instance.get_runs(limit=1)[0].run_id
    assert emitter_for(settings).flush(timeout=DELIVERY_TIMEOUT_S)
    dagster_run = next(
        e["run"]["runId"]
        for e in emitter_for(settings).events()
        if e["job"]["name"] == ORCHESTRATOR_JOB
        and {"key": "dagster.run_id", "value": run_id, "source": "DAGSTER"} in e["run"]["facets"]["tags"]["tags"]
    )
    (asset_run,) = asset_runs_under(settings, ORDERS, {dagster_run})
    assert marquez.run(dagster_run)["state"] == "COMPLETED"
    assert marquez.run(asset_run)["state"] == "COMPLETED"


def what_marquez_shows(api: MarquezApi, settings) -> dict:
    """What a user reads in Marquez about the project: each job's parent, datasets and runs (ids,
    states, times), the datasets there are, the graph from the orders topic. Not a dataset's fields
    or facets: Marquez shows those of the version it calls current, which it picks anew on every
    event of a run from an unordered query over the run's versions (a run that creates its dataset
    reports two: START's, and COMPLETE's with CREATE), so they can change with no re-send. The datasets
    are the pipeline's own: the other worker's pipelines add theirs to the same namespaces meanwhile."""
    listed = api.jobs(settings.lineage_namespace)
    jobs = {
        j["name"]: (
            j.get("parentJobName"),
            sorted(d["name"] for d in j["inputs"]),
            sorted(d["name"] for d in j["outputs"]),
            sorted(
                (r["id"], r["state"], r["startedAt"], r["endedAt"])
                for r in api.runs(settings.lineage_namespace, j["name"])
            ),
        )
        for j in listed
    }
    own = {(d["namespace"], d["name"]) for j in listed for d in [*j["inputs"], *j["outputs"]]}
    own |= {(identity.namespace, identity.name) for identity in (d.identity(settings) for d in DATASETS.values())}
    orders = ORDERS.identity(settings)
    graph = sorted(
        (node["id"], edge["destination"])
        for node in api.lineage(orders.namespace, orders.name)["graph"]
        for edge in node["outEdges"]
    )
    return {
        "jobs": jobs,
        "datasets": dataset_names(api, {namespace for namespace, _ in own}) & own,
        "graph": graph,
    }


def test_a_sender_that_lost_its_place_resends_the_whole_log_and_marquez_shows_the_same_lineage(marquez, settings):
    emitter = emitter_for(settings)
    assert emitter.flush(timeout=DELIVERY_TIMEOUT_S)
    before = what_marquez_shows(marquez, settings)
    # As after a sender crash that lost its cursor, under the lock every sender takes.
    with file_lock(emitter.delivery.lock_path):
        emitter.log.cursor_path.write_text("0")
        assert emitter.pending() == len(emitter.recorded())  # the design too
        assert emitter.delivery.deliver_locked()
    assert emitter.pending() == 0
    assert what_marquez_shows(marquez, settings) == before

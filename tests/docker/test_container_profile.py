"""The container profile: `dagster dev` with dagster-docker's ``DockerRunLauncher`` starts each run in
a container of the project's image, the asset's Spark job inside it, and the lineage is the lineage
of the same runs launched as processes: the same jobs, nesting, datasets, column lineage and run
states, in the event log and in Marquez."""

from __future__ import annotations

import dataclasses
import datetime as dt
import urllib.parse

import dagster as dg
import pytest
from dagster_docker.docker_run_launcher import DOCKER_CONTAINER_ID_TAG
from dagster_graphql import DagsterGraphQLClient

from lineage_assets.assets.common import asset_key
from lineage_assets.datasets import LAKEHOUSE_ORDERS, ORCHESTRATOR_JOB, SUPPLIER_STATS
from lineage_assets.generator import GeneratorConfig, generate_orders, produce_orders
from lineage_assets.lineage.emitter import emitter_for
from lineage_assets.lineage.graph import LineageGraph
from lineage_assets.lineage.marquez import MarquezApi, read_graph
from lineage_assets.settings import Settings
from tests.conftest import pipeline_of_its_own, wait_for
from tests.integration.test_deployments import orders_topic_ready
from tests.ui.dagster_dev import RUN_TIMEOUT_S, dagster_dev, stop_sensor

DAY = "2026-11-24"
ORDERS = GeneratorConfig(
    count=60, seed=2411, start=dt.datetime(2026, 11, 24, 10, tzinfo=dt.UTC), late_fraction=0, bad_fraction=0
)
# The settings a pipeline of its own changes: its names in the lineage, replaced to compare two pipelines.
OWN_NAMES = ("lineage_namespace", "iceberg_namespace", "orders_topic", "supplier_stats_topic", "archive_prefix")


def launch(url: str, home, job: str, **options) -> dg.DagsterRun:
    """A run of ``job`` launched as the UI launches it, once it has finished."""
    address = urllib.parse.urlparse(url)
    run_id = DagsterGraphQLClient(address.hostname, port_number=address.port).submit_job_execution(job, **options)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        return wait_for(
            lambda: (run := instance.get_run_by_id(run_id)) is not None and run.is_finished and run,
            RUN_TIMEOUT_S,
            f"run {run_id} of {job}",
            poll=3,
        )


def ingest_and_build_a_day(settings: Settings, name: str, launcher: str, tmp_path) -> tuple[Settings, list]:
    """The same orders on a pipeline of its own, then from `dagster dev` with ``launcher``: the catch-up
    ingestion, then the day's ``supplier_stats``. Its settings and the two runs."""
    own = dataclasses.replace(pipeline_of_its_own(settings, name), run_launcher=launcher)
    orders_topic_ready(own)
    produce_orders(list(generate_orders(ORDERS)), own.kafka_servers, own.schema_registry_url, own.orders_topic)
    home = tmp_path / name
    stop_sensor(own, home, "supplier_stats_on_new_orders")  # the day is built by the run this test launches
    with dagster_dev(own, home) as url:
        ingestion = launch(url, home, "__ASSET_JOB", asset_selection=[asset_key(LAKEHOUSE_ORDERS)])
        stats = launch(url, home, "supplier_stats_job", tags={"dagster/partition": DAY})
    return own, [ingestion, stats]


def comparable(graph: LineageGraph, settings: Settings) -> dict:
    """What a lineage graph says, with the pipeline's own names replaced by what they stand for."""
    names = sorted(((getattr(settings, field), field) for field in OWN_NAMES), key=lambda pair: -len(pair[0]))

    def name(text) -> str:
        text = str(text)
        for value, field in names:
            text = text.replace(value, f"<{field}>")
        return text

    return {
        "jobs": {name(key): (name(job.parent), job.latest_state) for key, job in graph.jobs.items()},
        "inputs": {name(job): sorted(map(name, datasets)) for job, datasets in graph.inputs.items() if datasets},
        "outputs": {name(job): sorted(map(name, datasets)) for job, datasets in graph.outputs.items() if datasets},
        "columns": sorted(
            (name(edge), sorted(hop.kinds)) for edges in graph.column_lineage.values() for edge, hop in edges.items()
        ),
    }


@pytest.fixture(scope="module")
def profiles(engine, stack, settings, tmp_path_factory):
    folder = tmp_path_factory.mktemp("profiles")
    in_containers = ingest_and_build_a_day(settings, "runs-in-containers", "docker", folder)
    as_processes = ingest_and_build_a_day(settings, "runs-as-processes", "process", folder)
    return in_containers, as_processes


def test_each_run_of_the_container_profile_runs_in_a_container_of_the_project_image(profiles, engine, settings):
    (own, runs), _ = profiles
    for run in runs:
        assert run.status == dg.DagsterRunStatus.SUCCESS, f"run {run.run_id} ended {run.status}"
        assert run.tags["dagster/image"] == settings.docker_image and run.tags[DOCKER_CONTAINER_ID_TAG]
    # Removed once the run ended: the run's record, logs and lineage outlive its container.
    assert not [
        c for c in engine.containers.list(all=True) if c.labels.get("dagster/run_id") in {r.run_id for r in runs}
    ]


def test_the_container_profile_has_the_lineage_of_the_process_profile_in_the_log_and_in_marquez(profiles):
    (in_containers, container_runs), (as_processes, process_runs) = profiles
    assert [r.status for r in process_runs] == [dg.DagsterRunStatus.SUCCESS] * 2

    def logged(settings: Settings) -> dict:
        return comparable(LineageGraph.from_events(emitter_for(settings).events()), settings)

    def in_marquez(settings: Settings) -> dict:
        assert emitter_for(settings).flush(timeout=90)
        return comparable(read_graph(MarquezApi(settings.marquez_api_url), settings), settings)

    log = logged(in_containers)
    assert log == logged(as_processes)
    # The Dagster run, the asset's run and Spark's own application run nested under it, all complete,
    # and the column lineage Spark's plan gave.
    dagster, asset = (f"<lineage_namespace>/{name}" for name in (ORCHESTRATOR_JOB, SUPPLIER_STATS.job.lineage_name))
    assert log["jobs"][asset] == (dagster, "COMPLETE")
    assert [state for parent, state in log["jobs"].values() if parent == asset] == ["COMPLETE"], "Spark's own run"
    assert log["columns"]
    assert in_marquez(in_containers) == in_marquez(as_processes)

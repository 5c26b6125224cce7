"""The container profile: `dagster dev` with dagster-docker's ``DockerRunLauncher`` starts each run in
a container of the project's image, the asset's Spark job inside it, and its runs keep to the reviewed
design every run launched as a process is held to (the end-to-end tests): the same jobs, nesting,
datasets, column lineage and run states, in the event log and in Marquez."""

from __future__ import annotations

import dataclasses

import dagster as dg
import pytest
from dagster_docker.docker_run_launcher import DOCKER_CONTAINER_ID_TAG

from lineage_assets.assets.common import asset_key
from lineage_assets.datasets import LAKEHOUSE_ORDERS, ORCHESTRATOR_JOB, SUPPLIER_STATS
from lineage_assets.generator import generate_orders, produce_orders
from lineage_assets.lineage.check import check_log, check_marquez_with_design
from lineage_assets.lineage.emitter import emitter_for
from lineage_assets.lineage.graph import LineageGraph, job_key
from lineage_assets.lineage.marquez import MarquezApi
from lineage_assets.settings import Settings
from lineage_assets.testing import pipeline_of_its_own
from tests.integration.test_deployments import orders_topic_ready
from tests.ui.dagster_dev import DAY, ORDERS, dagster_dev, launch, stop_sensor


@pytest.fixture(scope="module")
def in_containers(engine, stack, settings, tmp_path_factory) -> tuple[Settings, list[dg.DagsterRun]]:
    """A day of orders on a pipeline of its own, then from `dagster dev` with the container profile's
    launcher: the catch-up ingestion, then the day's ``supplier_stats``. Its settings and the two runs."""
    own = dataclasses.replace(pipeline_of_its_own(settings, "runs-in-containers"), run_launcher="docker")
    orders_topic_ready(own)
    produce_orders(list(generate_orders(ORDERS)), own)
    home = tmp_path_factory.mktemp("profiles") / "runs-in-containers"
    stop_sensor(own, home, "supplier_stats_on_new_orders")  # the day is built by the run this test launches
    with dagster_dev(own, home) as url:
        ingestion = launch(url, home, "__ASSET_JOB", asset_selection=[asset_key(LAKEHOUSE_ORDERS)])
        stats = launch(url, home, "supplier_stats_job", tags={"dagster/partition": DAY})
    return own, [ingestion, stats]


def test_each_run_of_the_container_profile_runs_in_a_container_of_the_project_image(in_containers, engine, settings):
    own, runs = in_containers
    for run in runs:
        assert run.status == dg.DagsterRunStatus.SUCCESS, f"run {run.run_id} ended {run.status}"
        assert run.tags["dagster/image"] == settings.docker_image and run.tags[DOCKER_CONTAINER_ID_TAG]
    # Removed once the run ended: the run's record, logs and lineage outlive its container.
    assert not [
        c for c in engine.containers.list(all=True) if c.labels.get("dagster/run_id") in {r.run_id for r in runs}
    ]


def test_the_container_profile_keeps_to_the_design_in_the_log_and_in_marquez(in_containers):
    own, _ = in_containers
    emitter = emitter_for(own)
    log = LineageGraph.from_events(emitter.events())
    # The Dagster run, the asset's run and Spark's own application run nested under it, all complete,
    # and the column lineage Spark's plan gave, to the derivation the design holds.
    jobs = (ORCHESTRATOR_JOB, SUPPLIER_STATS.job.lineage_name)
    dagster, asset = (job_key(own.lineage_namespace, name) for name in jobs)
    assert (log.jobs[asset].parent, log.jobs[asset].latest_state) == (dagster, "COMPLETE")
    assert [job.latest_state for job in log.jobs.values() if job.parent == asset] == ["COMPLETE"], "Spark's own run"
    assert log.column_lineage
    assert check_log(emitter.log, own) == []
    assert emitter.flush(timeout=90)
    gaps, not_yet_run = check_marquez_with_design(MarquezApi.of(own), own, emitter.log)
    assert gaps == []
    # Marquez knows runs of both assets' jobs this test launched (the others are designed, not yet run).
    ran = {job_key(own.lineage_namespace, d.job.lineage_name) for d in (LAKEHOUSE_ORDERS, SUPPLIER_STATS)}
    assert not [note for note in not_yet_run if any(f" {job} " in note for job in ran)], not_yet_run

"""A Dagster run's own lineage run, on a real Dagster instance: started and ended exactly once by the
executor of a launched run wherever its steps ran, not at all for a run that reports no lineage, and
ended by the sensor when the run's process died. (In-process runs and direct invocation:
``test_emitter.py``.)"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import dagster as dg
import pytest

from lineage_assets.assets.run_lineage import (
    LINEAGE_TAG,
    dead_dagster_run_lineage,
    run_lineage_executor,
    start_dagster_run,
)
from lineage_assets.datasets import SUPPLIER_STATS
from lineage_assets.lineage.emitter import emitter_for
from lineage_assets.resources.lineage import LineageResource
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.settings import Settings
from lineage_assets.settings_environment import settings_from_env


@dg.asset(key=["lakehouse", "supplier_stats"])
def reported(context, lineage: LineageResource):
    with lineage.asset_run(context, SUPPLIER_STATS):
        pass


@dg.asset
def unreported() -> int:
    return 1


def definitions() -> dg.Definitions:
    settings = settings_from_env()  # the test's state folder, in every step's process too
    return dg.Definitions(
        assets=[reported, unreported],
        jobs=[dg.define_asset_job("both"), dg.define_asset_job("unreported_only", selection=["unreported"])],
        resources={"lineage": LineageResource(environment=SettingsResource.of(settings))},
        executor=run_lineage_executor(settings),
    )


def both_job() -> dg.JobDefinition:
    return definitions().resolve_job_def("both")


def unreported_only_job() -> dg.JobDefinition:
    return definitions().resolve_job_def("unreported_only")


@pytest.fixture()
def settings(tmp_path, monkeypatch) -> Iterator[Settings]:
    monkeypatch.setenv("LINEAGE_ASSETS_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("LINEAGE_ASSETS_MARQUEZ_URL", "http://127.0.0.1:1")  # nothing listens there: the backend is down
    yield settings_from_env()
    emitter_for(settings_from_env()).stop_sender()


def test_a_launched_run_starts_and_ends_its_lineage_once_around_its_steps(settings):
    """Whether its steps run in the run's own process (the default) or each in a process of its own.
    Both runs in one test: Dagster keeps a reconstructed job (and the settings it was built with) per process."""
    asset_job = SUPPLIER_STATS.job.lineage_name
    seen = 0
    for run_config, step_processes in (({}, 0), ({"execution": {"config": {"multiprocess": {}}}}, 2)):
        with dg.instance_for_test() as instance:
            result = dg.execute_job(dg.reconstructable(both_job), instance, run_config=run_config)
            assert result.success
            tag = instance.get_run_by_id(result.run_id).tags[LINEAGE_TAG]
            workers = instance.get_records_for_run(result.run_id, of_type=dg.DagsterEventType.STEP_WORKER_STARTED)
            warnings = [e.user_message for e in instance.all_logs(result.run_id) if e.level == logging.WARNING]
        events = emitter_for(settings).events()
        recorded = [(e["job"]["name"], e["eventType"]) for e in events[seen:]]
        seen = len(events)
        assert len(workers.records) == step_processes
        assert recorded == [
            ("dagster", "START"),
            (asset_job, "START"),
            (asset_job, "COMPLETE"),
            ("dagster", "COMPLETE"),
        ]
        assert tag == "ended"
        # With the backend down, the run's end says in its own event log that its lineage waits.
        assert [warning for warning in warnings if "wait for the backend" in warning] == [
            emitter_for(settings).waiting_line()
        ]


def test_a_run_that_reports_no_lineage_has_no_lineage_run(settings):
    with dg.instance_for_test() as instance:
        result = dg.execute_job(dg.reconstructable(unreported_only_job), instance)
        assert result.success and LINEAGE_TAG not in instance.get_run_by_id(result.run_id).tags
    assert emitter_for(settings).events() == []


def test_the_sensor_ends_the_lineage_of_a_run_whose_process_died_once(settings):
    with dg.instance_for_test() as instance:
        run = instance.create_run_for_job(both_job())
        start_dagster_run(settings, instance, run.run_id)  # as its executor did, then the process died
        instance.report_run_failed(run)  # as Dagster's run monitoring marks a run whose worker is gone
        context = dg.build_sensor_context(instance=instance, resources={"environment": SettingsResource.of(settings)})
        for _ in range(2):
            dead_dagster_run_lineage(context)
        assert instance.get_run_by_id(run.run_id).tags[LINEAGE_TAG] == "ended"
    start, end = emitter_for(settings).events()
    assert (start["eventType"], end["eventType"]) == ("START", "FAIL")
    assert start["run"]["runId"] == end["run"]["runId"]
    assert end["run"]["facets"]["errorMessage"]["message"] == f"Dagster run {run.run_id} ended FAILURE"

"""`lineage check` against a real Dagster instance in a folder of the test's own: a lineage run without
its end whose Dagster run is in progress (a sensor's run, under way) is a note with its age and no gap;
once Dagster has ended that run (its worker died, and Dagster marked it failed) it is a run left RUNNING.
The lineage log is written here and the command line reads it; the instance's storage is the test
stack's PostgreSQL."""

from __future__ import annotations

import dataclasses
import re
import uuid

import dagster as dg
from openlineage.client.event_v2 import RunState

from lineage_assets.assets.run_lineage import dagster_run_of
from lineage_assets.datasets import ORCHESTRATOR_JOB, ORDERS
from lineage_assets.instance import prepare_dagster_home
from lineage_assets.lineage import events
from lineage_assets.lineage.emitter import LineageEmitter
from tests.integration.test_unrecorded_lineage import lineage_command
from tests.unit.test_lineage_check import SETTINGS, pipeline

SENSOR_JOB = "orders_sensor_job"


def started_dagster_run(instance: dg.DagsterInstance) -> str:
    """A run of the sensor's job that Dagster records as started, as its run worker does."""
    run = instance.add_run(dg.DagsterRun(job_name=SENSOR_JOB, run_id=str(uuid.uuid4())))
    instance.report_dagster_event(dg.DagsterEvent(dg.DagsterEventType.RUN_START.value, SENSOR_JOB), run.run_id)
    return run.run_id


def test_a_run_is_in_progress_while_its_dagster_run_is_and_left_running_once_dagster_ended_it(
    stack, settings, tmp_path
):
    # The instance's storage is in the test stack's PostgreSQL.
    settings = dataclasses.replace(SETTINGS, state_dir=tmp_path / "state", postgres_port=settings.postgres_port)
    home = prepare_dagster_home(settings, tmp_path / "dagster")
    emitter = LineageEmitter(settings.lineage_dir, None)
    for event in pipeline():  # the whole asset graph ran once and ended
        emitter.emit(event)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        run_id = started_dagster_run(instance)
        dagster_run = dagster_run_of(instance, run_id)
        # Its lineage so far: the Dagster run's own and its orders run have started.
        emitter.emit(events.dagster_run_event(RunState.START, dagster_run, settings))
        emitter.emit(events.asset_event(RunState.START, ORDERS, dagster_run, settings))
        unended = [
            (ORCHESTRATOR_JOB, dagster_run.lineage_run_id),
            (ORDERS.job.lineage_name, dagster_run.asset_run_id(ORDERS)),
        ]

        checked = lineage_command(settings, home, "check")
        assert checked.returncode == 0, checked.stdout + checked.stderr
        notes = [line.strip() for line in checked.stdout.splitlines() if "run in progress" in line]
        assert len(notes) == len(unended), checked.stdout
        for note, (job, lineage_run) in zip(notes, unended):
            said = re.escape(f"note: run in progress: {settings.lineage_namespace}/{job} run {lineage_run}, started ")
            assert re.fullmatch(said + r"\d+s ago", note), note

        # Its worker died: Dagster's code server (or run monitoring) marks the run failed.
        instance.report_run_failed(instance.get_run_by_id(run_id))
        checked = lineage_command(settings, home, "check")
        assert checked.returncode == 1, checked.stdout + checked.stderr
        assert "run in progress" not in checked.stdout
        assert [line.strip() for line in checked.stdout.splitlines() if "run left RUNNING" in line] == [
            f"- run left RUNNING: {settings.lineage_namespace}/{job} run {lineage_run} has no terminal event"
            for job, lineage_run in unended
        ]

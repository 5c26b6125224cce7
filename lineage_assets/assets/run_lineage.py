"""The lineage run of a Dagster run: the parent of its materializations' and checks' lineage runs,
started and ended once for each way Dagster runs a job, each by one path:

| way of running                                               | starts and ends it                          |
|--------------------------------------------------------------|---------------------------------------------|
| launched by the daemon or the webserver (UI, sensors,        | ``RunLineageExecutor``: the Definitions'    |
| schedules, backfills); ``dagster asset materialize`` and     | default executor, where the run is          |
| ``dagster job execute`` from the command line                | orchestrated, around its steps              |
| in-process: ``dg.materialize``, ``execute_in_process``       | ``LineageResource``'s set-up and teardown:  |
| (Dagster runs them with its own in-process executor)         | such a run sets its resources up once       |
| direct invocation of an asset or check (a unit test): there  | the asset's or check's own lineage run      |
| is no Dagster run, the step is the whole run                 | (``LineageResource.lineage_run``)           |
| a launched run whose process died (killed, machine lost):    | the sensor ``dead_dagster_run_lineage``,    |
| its executor never ends it, Dagster marks it failed or       | from Dagster's run status                   |
| cancelled                                                    |                                             |

Only a run with a step that reports lineage (one requiring the ``lineage`` resource) has a lineage
run. Where it stands is a tag of the Dagster run (``started``, then ``ended``), in Dagster's own run
storage, which the sensor queries: a run is ended once even when a path and the sensor both see it.
"""

from __future__ import annotations

import datetime as dt
from contextlib import AbstractContextManager, nullcontext

import dagster as dg
from dagster._core.errors import DagsterExecutionInterruptedError
from openlineage.client.event_v2 import RunState

from lineage_assets.datasets import DATASETS
from lineage_assets.lineage import events
from lineage_assets.lineage.emitter import emitter_for
from lineage_assets.lineage.run_facts import DagsterRun
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.settings import Settings
from lineage_assets.streaming.exclusive import catch_up_holder, exclusive_runs

LINEAGE_TAG = "lineage_assets/lineage"  # "started", then "ended": where the run's lineage run stands
LINEAGE_RESOURCE = "lineage"
DIRECT_INVOCATION = "direct_invocation"  # the job name of an asset invoked directly (no Dagster run record)
RUN_END_DELIVERY_S = 5.0  # what a run's end gives its last events to reach a backend that answers
TERMINAL_STATES = {
    dg.DagsterRunStatus.SUCCESS: RunState.COMPLETE,
    dg.DagsterRunStatus.FAILURE: RunState.FAIL,
    dg.DagsterRunStatus.CANCELED: RunState.ABORT,
}


def dagster_run_of(instance: dg.DagsterInstance, run_id: str) -> DagsterRun:
    record = instance.get_run_record_by_id(run_id)
    if record is None:
        return DagsterRun(run_id=run_id, job_name=DIRECT_INVOCATION, started_at=dt.datetime.now(dt.UTC))
    return DagsterRun(run_id=run_id, job_name=record.dagster_run.job_name, started_at=record.create_timestamp)


def ending(error: BaseException | None) -> RunState:
    """How a run that ``error`` ended (None: it did not) ends in lineage: ABORT when interrupted."""
    if error is None:
        return RunState.COMPLETE
    return RunState.ABORT if isinstance(error, (DagsterExecutionInterruptedError, KeyboardInterrupt)) else RunState.FAIL


def start_dagster_run(settings: Settings, instance: dg.DagsterInstance, run_id: str) -> None:
    instance.add_run_tags(run_id, {LINEAGE_TAG: "started"})
    emitter_for(settings).emit(events.dagster_run_event(RunState.START, dagster_run_of(instance, run_id), settings))


def end_dagster_run(
    settings: Settings, instance: dg.DagsterInstance, run_id: str, status: dg.DagsterRunStatus | None = None
) -> None:
    """The Dagster run's terminal lineage event, from its final status (or ``status``), if its lineage
    run started and has not ended."""
    record = instance.get_run_record_by_id(run_id)
    if record is None or record.dagster_run.tags.get(LINEAGE_TAG) != "started":
        return
    state = TERMINAL_STATES.get(status or record.dagster_run.status)
    if state is None:
        return  # not finished
    instance.add_run_tags(run_id, {LINEAGE_TAG: "ended"})
    emitter_for(settings).emit(
        events.dagster_run_event(
            state,
            dagster_run_of(instance, run_id),
            settings,
            error_message=f"Dagster run {run_id} ended {(status or record.dagster_run.status).value}"
            if state != RunState.COMPLETE
            else None,
        )
    )


def report_waiting(settings: Settings, log: dg.DagsterLogManager) -> None:
    """A warning in the run's own event log when, as its lineage ends, events of the log still wait for
    the backend: where a user of ``dagster asset materialize`` or the UI looks, not only the demo."""
    emitter = emitter_for(settings)
    if not emitter.delivery.delivered_by_sender(RUN_END_DELIVERY_S):
        log.warning(emitter.waiting_line())


def streaming_claim(
    settings: Settings, instance: dg.DagsterInstance, run: dg.DagsterRun
) -> AbstractContextManager[None]:
    """The locks of the streaming jobs among the steps the run executes, all held from the run's start
    (each step then runs under its run's claim): a second catch-up run, or one while a job is
    deployed, is refused before any of its steps runs, naming the run it would collide with, rather
    than each run failing at a different step."""
    plan = (
        instance.get_execution_plan_snapshot(run.execution_plan_snapshot_id) if run.execution_plan_snapshot_id else None
    )
    steps = set(plan.step_keys_to_execute) if plan else set()
    jobs = {d.job.name: d.key for d in DATASETS.values() if d.job.streaming and d.node_name in steps}
    return exclusive_runs(settings.state_dir, jobs, catch_up_holder(run.run_id)) if jobs else nullcontext()


def reports_lineage(job: dg.JobDefinition, execution_plan) -> bool:
    """Whether any step the plan executes requires the lineage resource."""
    to_execute = set(execution_plan.step_keys_to_execute)
    return any(
        LINEAGE_RESOURCE in job.get_op(step.node_handle).definition.required_resource_keys
        for step in execution_plan.steps
        if step.key in to_execute
    )


class RunLineageExecutor(dg.Executor):
    """Dagster's default executor, starting the run's lineage run before its first step and ending it
    once its last step is done, where the run is orchestrated (once, whatever the steps' processes)."""

    def __init__(self, inner: dg.Executor, settings: Settings):
        self.inner, self.settings = inner, settings

    @property
    def retries(self):
        return self.inner.retries

    @property
    def step_dependency_config(self):
        return self.inner.step_dependency_config

    def execute(self, plan_context, execution_plan):
        if not reports_lineage(plan_context.job.get_definition(), execution_plan):
            yield from self.inner.execute(plan_context, execution_plan)
            return
        instance, run_id = plan_context.instance, plan_context.run_id
        with streaming_claim(self.settings, instance, plan_context.dagster_run):
            start_dagster_run(self.settings, instance, run_id)
            status = dg.DagsterRunStatus.SUCCESS
            try:
                for event in self.inner.execute(plan_context, execution_plan):
                    if event.is_step_failure:
                        status = dg.DagsterRunStatus.FAILURE
                    yield event
            except (DagsterExecutionInterruptedError, KeyboardInterrupt):
                status = dg.DagsterRunStatus.CANCELED
                raise
            except BaseException:
                status = dg.DagsterRunStatus.FAILURE
                raise
            finally:
                end_dagster_run(self.settings, instance, run_id, status)
                report_waiting(self.settings, plan_context.log)


def run_lineage_executor(settings: Settings) -> dg.ExecutorDefinition:
    """The Definitions' default executor: Dagster's own default, configured the same way, wrapped;
    but running a run's steps in the run's own process unless its config asks for ``multiprocess``.
    Every step's work runs in a process of its own already (a spark-submit, a deployment), and a
    process per step would load the definitions again before each step could start."""
    default = dg.multi_or_in_process_executor
    create_default = default.executor_creation_fn
    if create_default is None:
        raise dg.DagsterInvariantViolationError(f"Dagster's default executor {default.name} has no creation function")
    return dg.ExecutorDefinition(
        name=default.name,
        config_schema=dg.Field(default.config_schema.as_field().config_type, default_value={"in_process": {}}),
        requirements=default.get_requirements,
        executor_creation_fn=lambda context: RunLineageExecutor(create_default(context), settings),
        description=RunLineageExecutor.__doc__,
    )


# Running by default: without it the lineage of a run whose process died would stay RUNNING.
@dg.sensor(
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Ends the lineage run of each Dagster run that died (failed, cancelled) before its executor ended it, "
    "and sends what a run's container left undelivered.",
)
def dead_dagster_run_lineage(context: dg.SensorEvaluationContext, environment: SettingsResource):
    # A run in a container (the docker run launcher) takes its lineage sender with it when it ends.
    emitter_for(environment.settings).send_pending()
    dead = context.instance.get_run_records(
        filters=dg.RunsFilter(
            statuses=[dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED], tags={LINEAGE_TAG: "started"}
        )
    )
    for record in dead:
        end_dagster_run(environment.settings, context.instance, record.dagster_run.run_id)
    return dg.SkipReason(f"ended the lineage of {len(dead)} Dagster runs that died")

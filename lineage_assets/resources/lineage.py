"""OpenLineage for asset materializations: one lineage run per materialization, nested under the
Dagster run, with Spark's own lineage nested under it."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
from dagster._core.errors import DagsterExecutionInterruptedError
from openlineage.client.event_v2 import RunState
from openlineage.client.serde import Serde

from lineage_assets.catalog import ORCHESTRATOR_JOB, Check, Dataset
from lineage_assets.lineage import events
from lineage_assets.lineage.emitter import LineageEmitter, configured_backend
from lineage_assets.resources.lakehouse import LakehouseResource
from lineage_assets.settings import Settings

_EMITTERS: dict[Path, LineageEmitter] = {}


def lineage_folder(settings: Settings) -> Path:
    return settings.state_dir / "lineage"


def emitter_for(settings: Settings) -> LineageEmitter:
    """One emitter per lineage folder and process (shared by every asset)."""
    folder = lineage_folder(settings)
    if folder not in _EMITTERS:
        _EMITTERS[folder] = LineageEmitter(folder, configured_backend(settings.marquez_api_url))
    return _EMITTERS[folder]


def _first_time(settings: Settings, run_id: str, what: str) -> bool:
    """True exactly once per (Dagster run, what), across processes (steps may run in several)."""
    marker = lineage_folder(settings) / "dagster-runs" / f"{run_id}.{what}"
    marker.parent.mkdir(parents=True, exist_ok=True)
    try:
        marker.open("x").close()
        return True
    except FileExistsError:
        return False


DIRECT_INVOCATION = "direct_invocation"  # the job name of an asset invoked directly (no Dagster run record)


def dagster_run_of(instance: dg.DagsterInstance, run_id: str) -> events.DagsterRun:
    record = instance.get_run_record_by_id(run_id)
    if record is None:
        return events.DagsterRun(run_id=run_id, job_name=DIRECT_INVOCATION, started_at=dt.datetime.now(dt.UTC))
    return events.DagsterRun(run_id=run_id, job_name=record.dagster_run.job_name, started_at=record.create_timestamp)


def start_dagster_run(settings: Settings, dagster_run: events.DagsterRun) -> None:
    if _first_time(settings, dagster_run.run_id, "started"):
        emitter_for(settings).emit(events.dagster_run_event(RunState.START, dagster_run, settings))


def end_dagster_run(settings: Settings, instance: dg.DagsterInstance, run_id: str,
                    status: dg.DagsterRunStatus | None = None) -> None:
    """The Dagster run's terminal lineage event, from its final status (or ``status``); once per run."""
    if status is None:
        record = instance.get_run_record_by_id(run_id)
        status = record.dagster_run.status if record else None
    state = {dg.DagsterRunStatus.SUCCESS: RunState.COMPLETE, dg.DagsterRunStatus.FAILURE: RunState.FAIL,
             dg.DagsterRunStatus.CANCELED: RunState.ABORT}.get(status)
    if state is None or not (lineage_folder(settings) / "dagster-runs" / f"{run_id}.started").exists():
        return  # not finished, or a run without asset lineage
    if _first_time(settings, run_id, "ended"):
        emitter_for(settings).emit(events.dagster_run_event(
            state, dagster_run_of(instance, run_id), settings,
            error_message=f"Dagster run {run_id} ended {status.value}" if state != RunState.COMPLETE else None))


def ending(error: BaseException | None) -> RunState:
    """How a run that ``error`` ended (None: it did not) ends in lineage: ABORT when interrupted."""
    if error is None:
        return RunState.COMPLETE
    return RunState.ABORT if isinstance(error, (DagsterExecutionInterruptedError, KeyboardInterrupt)) else RunState.FAIL


SPARK_AGENT_LISTENER = "io.openlineage.spark.agent.OpenLineageSparkListener"  # openlineage-spark
# Root nodes (optimized logical plans) of the Spark actions the agent would report as jobs of their own.
SPARK_ACTIONS_WITHOUT_LINEAGE = tuple(f"org.apache.spark.sql.catalyst.plans.logical.{node}" for node in (
    "CreateTable", "OverwriteByExpression", "GlobalLimit", "Sort"))


class AssetRunLineage:
    """The lineage run of one materialization; the asset calls ``complete`` with what it wrote."""

    def __init__(self, emitter: LineageEmitter, dataset: Dataset, dagster_run: events.DagsterRun, settings: Settings):
        self.emitter, self.dataset, self.dagster_run, self.settings = emitter, dataset, dagster_run, settings
        self.statistics: events.OutputStatistics | None = None
        self.lifecycle: str | None = None
        self.version: events.DatasetVersion | None = None
        self.quality: dict | None = None
        self.reads: tuple[events.SourceRead, ...] = ()

    @property
    def run_id(self) -> str:
        return self.dagster_run.asset_run_id(self.dataset)

    def complete(self, statistics: events.OutputStatistics, lifecycle: str | None = None, *,
                 version: events.DatasetVersion | None = None,
                 quality: dict | None = None, reads: tuple[events.SourceRead, ...] = ()) -> None:
        """What the run wrote (the version it made, the job's ``quality`` report entry), and what it read of its inputs."""
        self.statistics, self.lifecycle, self.version, self.quality, self.reads = statistics, lifecycle, version, quality, reads

    def emit(self, state: RunState, error: BaseException | None = None) -> None:
        self.emitter.emit(events.asset_event(state, self.dataset, self.dagster_run, self.settings,
                                             statistics=self.statistics, lifecycle=self.lifecycle, error=error,
                                             version=self.version, quality=self.quality, reads=self.reads))

    def spark_conf(self, spark_events: Path) -> dict[str, str]:
        """openlineage-spark configuration nesting the Spark application under this run.

        The agent names the application's job after the application (made snake_case), and Marquez
        shows it under the asset's job (``dagster.supplier_stats.supplier_stats_spark``). Its
        actions report no datasets: the asset's own run reports the asset's edges and column lineage
        from the catalog, and each action would otherwise be a job of its own in the graph (a second
        writer of the asset's table, a reader of its metadata tables)."""
        namespace, root = self.settings.lineage_namespace, self.dagster_run
        return {
            "spark.extraListeners": SPARK_AGENT_LISTENER,
            "spark.openlineage.namespace": namespace,
            "spark.app.name": f"{self.dataset.job.name}_spark",
            "spark.openlineage.parentJobNamespace": namespace,
            "spark.openlineage.parentJobName": self.dataset.job.lineage_name,
            "spark.openlineage.parentRunId": self.run_id,
            "spark.openlineage.rootParentJobNamespace": namespace,
            "spark.openlineage.rootParentJobName": ORCHESTRATOR_JOB,
            "spark.openlineage.rootParentRunId": root.lineage_run_id,
            "spark.openlineage.filter.deniedSparkNodes": f"[{';'.join(SPARK_ACTIONS_WITHOUT_LINEAGE)}]",  # the agent's list syntax
            # The agent writes to a file; its events then join the project's log and sender.
            "spark.openlineage.transport.type": "file",
            "spark.openlineage.transport.location": str(spark_events),
        }

    def take_spark_events(self, spark_events: Path, ended_by: BaseException | None = None) -> int:
        """Forward the Spark agent's events into the log. When ``ended_by`` ends this run ABORT or
        FAIL, the application's COMPLETE takes that state: a stopped driver shuts its SparkContext
        down normally, and the agent reports any such end COMPLETE, which the application was not."""
        if not spark_events.exists():
            return 0
        state = ending(ended_by)
        lines = [line for line in spark_events.read_text().splitlines() if line.strip()]
        for line in lines:
            event = json.loads(line) if state != RunState.COMPLETE else None
            if event is not None and event.get("eventType") == RunState.COMPLETE.value:
                event["eventType"] = state.value
                event["run"].setdefault("facets", {})["errorMessage"] = Serde.to_dict(events.error_facet(
                    ended_by, f"the asset run ended {state.value} while the Spark application ran"))
                line = json.dumps(event)
            self.emitter.emit(line)
        spark_events.unlink()
        return len(lines)


class CheckRunLineage:
    """The lineage run of one asset check evaluation; the check returns ``result(...)``."""

    def __init__(self, emitter: LineageEmitter, check: Check, dagster_run: events.DagsterRun, settings: Settings):
        self.emitter, self.check, self.dagster_run, self.settings = emitter, check, dagster_run, settings
        self.assertions: tuple[events.Assertion, ...] = ()

    def result(self, assertions: list[events.Assertion], metadata: dict) -> dg.AssetCheckResult:
        """The evaluation: passed when every assertion holds; the assertions also go into the lineage."""
        self.assertions = tuple(assertions)
        return dg.AssetCheckResult(passed=all(a.passed for a in assertions), metadata={
            **metadata, "failed_assertions": dg.MetadataValue.json(
                [f"{a.kind}" + (f" on {a.column}" if a.column else "") + f": expected {a.expected}, got {a.actual}"
                 for a in assertions if not a.passed])})

    def emit(self, state: RunState, error: BaseException | None = None) -> None:
        self.emitter.emit(events.check_event(state, self.check, self.dagster_run, self.settings,
                                             assertions=self.assertions, error=error))


class LineageResource(dg.ConfigurableResource):
    lakehouse: LakehouseResource

    def emitter(self) -> LineageEmitter:
        return emitter_for(self.lakehouse.settings())

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        """Ends the lineage of an in-process run (``dg.materialize``, ``execute_in_process``): such a
        run has no code origin, so no run-status sensor ever sees it, and it tears its resources down
        once, after its last step."""
        run = getattr(context, "run", None)
        if run is None or run.job_code_origin is not None or run.remote_job_origin is not None:
            return
        failed = context.instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.STEP_FAILURE).records
        end_dagster_run(self.lakehouse.settings(), context.instance, run.run_id,
                        dg.DagsterRunStatus.FAILURE if failed else dg.DagsterRunStatus.SUCCESS)

    def asset_run(self, context: dg.AssetExecutionContext, dataset: Dataset):
        """The lineage run of this materialization (``lineage_run``); the asset calls ``complete``."""
        return self.lineage_run(context, lambda dagster_run: AssetRunLineage(
            self.emitter(), dataset, dagster_run, self.lakehouse.settings()))

    def check_run(self, context: dg.AssetCheckExecutionContext, check: Check):
        """The lineage run of this check evaluation (``lineage_run``); the check returns ``result``."""
        return self.lineage_run(context, lambda dagster_run: CheckRunLineage(
            self.emitter(), check, dagster_run, self.lakehouse.settings()))

    @contextmanager
    def lineage_run(self, context: dg.AssetExecutionContext | dg.AssetCheckExecutionContext,
                    make: Callable[[events.DagsterRun], AssetRunLineage | CheckRunLineage]):
        """START now; on leaving, COMPLETE, FAIL with the error, or ABORT if the run was interrupted.
        A directly invoked asset or check is its whole run: no run-status sensor will end the parent
        run, so it ends here too. Emission never raises into the step."""
        settings = self.lakehouse.settings()
        # A directly invoked asset (an asset unit test) has a run id but no run record. `context.run`
        # raises for such contexts, so the run id is read from the op's context.
        dagster_run = dagster_run_of(context.instance, context.op_execution_context.run_id)
        start_dagster_run(settings, dagster_run)
        run = make(dagster_run)
        run.emit(RunState.START)
        error = None
        try:
            yield run
        except BaseException as raised:
            error = raised
            raise
        finally:
            state = ending(error)
            run.emit(state, error=error)
            if dagster_run.job_name == DIRECT_INVOCATION:
                self.emitter().emit(events.dagster_run_event(
                    state, dagster_run, settings, error_message=f"{type(error).__name__}: {error}" if error else None))


class RunLineageExecutor(dg.Executor):
    """Dagster's default executor, ending the Dagster run's lineage run once its last step is done.

    It runs where the run is orchestrated, so it ends runs no run-status sensor sees: those started
    from the command line (``dagster asset materialize``, ``dagster job execute``) and any run while
    no daemon runs. The sensors stay as the backstop for a run that dies before its steps end."""

    def __init__(self, inner: dg.Executor, settings: Settings):
        self.inner, self.settings = inner, settings

    @property
    def retries(self):
        return self.inner.retries

    @property
    def step_dependency_config(self):
        return self.inner.step_dependency_config

    def execute(self, plan_context, execution_plan):
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
            end_dagster_run(self.settings, plan_context.instance, plan_context.run_id, status)


def run_lineage_executor(settings: Settings) -> dg.ExecutorDefinition:
    """The Definitions' default executor: Dagster's own default, configured the same way, wrapped."""
    default = dg.multi_or_in_process_executor
    return dg.ExecutorDefinition(
        name=default.name, config_schema=default.config_schema, requirements=default.get_requirements,
        executor_creation_fn=lambda context: RunLineageExecutor(default.executor_creation_fn(context), settings),
        description=RunLineageExecutor.__doc__)


# Running by default: without them a Dagster run's lineage would stay RUNNING forever.
@dg.run_status_sensor(run_status=dg.DagsterRunStatus.SUCCESS, monitor_all_code_locations=False,
                      default_status=dg.DefaultSensorStatus.RUNNING,
                      description="Sends the terminal lineage event of each finished Dagster run.")
def dagster_run_succeeded_lineage(context: dg.RunStatusSensorContext, lineage: LineageResource):
    end_dagster_run(lineage.lakehouse.settings(), context.instance, context.dagster_run.run_id)


@dg.run_failure_sensor(default_status=dg.DefaultSensorStatus.RUNNING,
                       description="Sends the FAIL lineage event of each failed Dagster run.")
def dagster_run_failed_lineage(context: dg.RunFailureSensorContext, lineage: LineageResource):
    end_dagster_run(lineage.lakehouse.settings(), context.instance, context.dagster_run.run_id)


@dg.run_status_sensor(run_status=dg.DagsterRunStatus.CANCELED, default_status=dg.DefaultSensorStatus.RUNNING,
                      description="Sends the ABORT lineage event of each cancelled Dagster run.")
def dagster_run_cancelled_lineage(context: dg.RunStatusSensorContext, lineage: LineageResource):
    end_dagster_run(lineage.lakehouse.settings(), context.instance, context.dagster_run.run_id)


RUN_LINEAGE_SENSORS = [dagster_run_succeeded_lineage, dagster_run_failed_lineage, dagster_run_cancelled_lineage]

"""OpenLineage for asset materializations and check evaluations: one lineage run per
materialization or evaluation, nested under the Dagster run's, with Spark's own lineage nested under
it. How the Dagster run's lineage run starts and ends is ``assets/run_lineage.py``'s; this resource
serves two of its ways: an in-process run and a direct invocation."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, contextmanager

import dagster as dg
from openlineage.client.event_v2 import RunState
from pydantic import PrivateAttr

from lineage_assets.assets.run_lineage import (
    DIRECT_INVOCATION,
    dagster_run_of,
    end_dagster_run,
    ending,
    report_waiting,
    start_dagster_run,
    streaming_claim,
)
from lineage_assets.datasets import Check, Dataset
from lineage_assets.lineage import events
from lineage_assets.lineage.emitter import LineageEmitter, emitter_for
from lineage_assets.lineage.run_facts import Assertion, DagsterRun, RunFacts
from lineage_assets.lineage.spark_agent import AgentEvidence, SparkApplication
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.settings import Settings


class AssetRunLineage:
    """The lineage run of one materialization; the asset calls ``complete`` with what it read and wrote."""

    def __init__(
        self,
        emitter: LineageEmitter,
        dataset: Dataset,
        dagster_run: DagsterRun,
        settings: Settings,
        lifecycle: str | None = None,
    ):
        self.emitter, self.dataset, self.dagster_run, self.settings = emitter, dataset, dagster_run, settings
        self.facts = RunFacts(lifecycle=lifecycle)

    @property
    def run_id(self) -> str:
        return self.dagster_run.asset_run_id(self.dataset)

    def complete(self, facts: RunFacts) -> None:
        self.facts = facts

    def emit(self, state: RunState, error: BaseException | None = None) -> None:
        self.emitter.emit(
            events.asset_event(state, self.dataset, self.dagster_run, self.settings, self.facts, error=error)
        )

    def spark_application(self) -> SparkApplication:
        """The Spark application this run submits, nested under it in the lineage."""
        return SparkApplication(self.settings, self.dataset, self.run_id, self.dagster_run.lineage_run_id)

    def forward_spark_events(
        self, application: SparkApplication, ended_by: BaseException | None = None
    ) -> AgentEvidence:
        """The application's own events into the log, ending as this run ends when ``ended_by`` ends it;
        its actions' lineage kept as evidence."""
        return application.forward_events(self.emitter, ending(ended_by), ended_by)


class CheckRunLineage:
    """The lineage run of one asset check evaluation; the check returns ``result(...)``."""

    def __init__(self, emitter: LineageEmitter, check: Check, dagster_run: DagsterRun, settings: Settings):
        self.emitter, self.check, self.dagster_run, self.settings = emitter, check, dagster_run, settings
        self.assertions: tuple[Assertion, ...] = ()

    @property
    def run_id(self) -> str:
        return self.dagster_run.check_run_id(self.check)

    def result(self, assertions: list[Assertion], metadata: dict) -> dg.AssetCheckResult:
        """The evaluation: passed when every assertion holds; the assertions also go into the lineage."""
        self.assertions = tuple(assertions)
        return dg.AssetCheckResult(
            passed=all(a.passed for a in assertions),
            metadata={
                **metadata,
                "failed_assertions": dg.MetadataValue.json(
                    [
                        f"{a.kind}"
                        + (f" on {a.column}" if a.column else "")
                        + f": expected {a.expected}, got {a.actual}"
                        for a in assertions
                        if not a.passed
                    ]
                ),
            },
        )

    def emit(self, state: RunState, error: BaseException | None = None) -> None:
        self.emitter.emit(
            events.check_event(
                state, self.check, self.dagster_run, self.settings, assertions=self.assertions, error=error
            )
        )


class LineageResource(dg.ConfigurableResource):
    environment: SettingsResource
    _claim: AbstractContextManager[None] | None = PrivateAttr(default=None)

    def emitter(self) -> LineageEmitter:
        return emitter_for(self.environment.settings)

    @staticmethod
    def _in_process_run(context: dg.InitResourceContext) -> tuple[dg.DagsterRun, dg.DagsterInstance] | None:
        """The run being set up if it runs in this process (``dg.materialize``, ``execute_in_process``),
        and its instance: such a run has no code origin, no executor of the Definitions, and sets its
        resources up once."""
        run, instance = getattr(context, "run", None), context.instance
        if run is None or instance is None or run.job_code_origin or run.remote_job_origin:
            return None
        return run, instance

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        if in_process := self._in_process_run(context):
            run, instance = in_process
            # Where an in-process run starts: its streaming jobs are claimed here, as the executor
            # claims a launched run's (``streaming_claim``); refused, the run does nothing.
            self._claim = streaming_claim(self.environment.settings, instance, run)
            self._claim.__enter__()
            start_dagster_run(self.environment.settings, instance, run.run_id)

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        if in_process := self._in_process_run(context):
            run, instance = in_process
            failed = instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.STEP_FAILURE).records
            try:
                end_dagster_run(
                    self.environment.settings,
                    instance,
                    run.run_id,
                    dg.DagsterRunStatus.FAILURE if failed else dg.DagsterRunStatus.SUCCESS,
                )
                if context.log is not None:  # a run's context has its log; Dagster types it optional for others
                    report_waiting(self.environment.settings, context.log)
            finally:
                if self._claim is not None:
                    self._claim.__exit__(None, None, None)
                    self._claim = None

    def asset_run(self, context: dg.AssetExecutionContext, dataset: Dataset, lifecycle: str | None = None):
        """The lineage run of this materialization (``lineage_run``); the asset calls ``complete``.
        ``lifecycle``: the change every run makes to its dataset (OVERWRITE), reported from START on.
        Marquez keys a dataset version on the lifecycle change too, so a START without it would add
        an empty version before COMPLETE's to the dataset's history at every run."""
        return self.lineage_run(
            context,
            lambda dagster_run: AssetRunLineage(
                self.emitter(), dataset, dagster_run, self.environment.settings, lifecycle
            ),
        )

    def check_run(self, context: dg.AssetCheckExecutionContext, check: Check):
        """The lineage run of this check evaluation (``lineage_run``); the check returns ``result``."""
        return self.lineage_run(
            context, lambda dagster_run: CheckRunLineage(self.emitter(), check, dagster_run, self.environment.settings)
        )

    @contextmanager
    def lineage_run(
        self,
        context: dg.AssetExecutionContext | dg.AssetCheckExecutionContext,
        make: Callable[[DagsterRun], AssetRunLineage | CheckRunLineage],
    ):
        """START now; on leaving, COMPLETE, FAIL with the error, or ABORT if the run was interrupted.
        A directly invoked asset or check is its whole run: it starts and ends the parent run here.
        Emission never raises into the step."""
        settings = self.environment.settings
        # A directly invoked asset (an asset unit test) has a run id but no run record. `context.run`
        # raises for such contexts, so the run id is read from the op's context.
        dagster_run = dagster_run_of(context.instance, context.op_execution_context.run_id)
        direct = dagster_run.job_name == DIRECT_INVOCATION
        emitter = self.emitter()
        failures_before = emitter.emit_failures
        if direct:
            emitter.emit(events.dagster_run_event(RunState.START, dagster_run, settings))
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
            if direct:
                emitter.emit(
                    events.dagster_run_event(
                        state,
                        dagster_run,
                        settings,
                        error_message=f"{type(error).__name__}: {error}" if error else None,
                    )
                )
            if unrecorded := emitter.emit_failures - failures_before:
                report_unrecorded(context, emitter, unrecorded, run.run_id)


UNRECORDED_EVENTS = "lineage/unrecorded_events"  # metadata of a materialization whose lineage is incomplete


def report_unrecorded(
    context: dg.AssetExecutionContext | dg.AssetCheckExecutionContext,
    emitter: LineageEmitter,
    count: int,
    run_id: str,
) -> None:
    """Say in Dagster's event log, and on the materialization, that ``count`` events of this step's
    lineage run could not be recorded: the materialization stands, its lineage does not."""
    context.log.warning(
        f"lineage: {count} events of lineage run {run_id} could not be recorded in {emitter.log.segments_dir} "
        f"({emitter.last_failure}); this run's lineage is incomplete (`lineage-assets lineage check` names it)"
    )
    if isinstance(context, dg.AssetExecutionContext):
        context.add_asset_metadata(
            {UNRECORDED_EVENTS: count, "lineage/unrecorded_reason": emitter.last_failure, "lineage/run_id": run_id}
        )

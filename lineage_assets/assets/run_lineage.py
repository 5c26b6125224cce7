"""The lineage area: what ends a Dagster run's own lineage run (its START comes with its first step,
``resources/lineage.py``), for every way a run can end."""

from __future__ import annotations

import dagster as dg
from dagster._core.errors import DagsterExecutionInterruptedError

from lineage_assets.resources.lineage import LineageResource, end_dagster_run
from lineage_assets.settings import Settings


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
        name=default.name,
        config_schema=default.config_schema,
        requirements=default.get_requirements,
        executor_creation_fn=lambda context: RunLineageExecutor(default.executor_creation_fn(context), settings),
        description=RunLineageExecutor.__doc__,
    )


# Running by default: without them a Dagster run's lineage would stay RUNNING forever.
@dg.run_status_sensor(
    run_status=dg.DagsterRunStatus.SUCCESS,
    monitor_all_code_locations=False,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Sends the terminal lineage event of each finished Dagster run.",
)
def dagster_run_succeeded_lineage(context: dg.RunStatusSensorContext, lineage: LineageResource):
    end_dagster_run(lineage.environment.settings, context.instance, context.dagster_run.run_id)


@dg.run_failure_sensor(
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Sends the FAIL lineage event of each failed Dagster run.",
)
def dagster_run_failed_lineage(context: dg.RunFailureSensorContext, lineage: LineageResource):
    end_dagster_run(lineage.environment.settings, context.instance, context.dagster_run.run_id)


@dg.run_status_sensor(
    run_status=dg.DagsterRunStatus.CANCELED,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Sends the ABORT lineage event of each cancelled Dagster run.",
)
def dagster_run_cancelled_lineage(context: dg.RunStatusSensorContext, lineage: LineageResource):
    end_dagster_run(lineage.environment.settings, context.instance, context.dagster_run.run_id)


def run_lineage_definitions(settings: Settings) -> dg.Definitions:
    return dg.Definitions(
        sensors=[dagster_run_succeeded_lineage, dagster_run_failed_lineage, dagster_run_cancelled_lineage],
        executor=run_lineage_executor(settings),
    )

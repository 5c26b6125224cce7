"""OpenLineage events for asset materializations, built from the dataset catalog.

One materialization of an asset is one OpenLineage run of the asset's producing job (the job the
catalog names for its dataset). Its inputs are the asset's upstream datasets and its output the
asset's own dataset, each named by the catalog (``run_datasets`` builds them and their facets), so the
lineage graph is the asset graph. Every asset run has a ``parent`` facet pointing at a run for the
Dagster run itself: a run of the one orchestrator job (``catalog.ORCHESTRATOR_JOB``), tagged with the
Dagster job and run it stands for.

Run ids are UUIDv7 derived from the Dagster run (its id and start time) and the asset key: sending
a run's events again never creates a second run.
"""

from __future__ import annotations

import datetime as dt
import functools
import importlib.metadata
import subprocess
import traceback

import openlineage.client
from openlineage.client.event_v2 import InputDataset, Job, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    JobFacet,
    RunFacet,
    documentation_job,
    error_message_run,
    job_type_job,
    ownership_job,
    parent_run,
    processing_engine_run,
    source_code_location_job,
    tags_run,
)

from lineage_assets.datasets import DATASETS, ORCHESTRATOR_JOB, OWNERS, Check, Dataset
from lineage_assets.lineage.facets import PRODUCER, StreamingProgressRunFacet
from lineage_assets.lineage.observed import Observation
from lineage_assets.lineage.run_datasets import assertions_facet, dataset_facets, inputs, output
from lineage_assets.lineage.run_facts import NO_FACTS, Assertion, DagsterRun, JobError, RunFacts
from lineage_assets.settings import PROJECT_ROOT, Settings

INTEGRATION = "DAGSTER"


@functools.cache
def _git_revision() -> str | None:
    try:
        return (
            subprocess.run(
                ["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=5, check=True
            ).stdout.strip()
            or None
        )
    except (OSError, subprocess.SubprocessError):
        return None


def _job_facets(
    processing_type: str,
    job_type: str,
    description: str,
    source: str,
    emission: job_type_job.EmissionPattern | None = None,
) -> dict[str, JobFacet]:
    return {
        "jobType": job_type_job.JobTypeJobFacet(
            processingType=processing_type, integration=INTEGRATION, jobType=job_type, emissionPattern=emission
        ),
        "documentation": documentation_job.DocumentationJobFacet(description=description),
        "ownership": ownership_job.OwnershipJobFacet(owners=[ownership_job.Owner(name=owner) for owner in OWNERS]),
        "sourceCodeLocation": source_code_location_job.SourceCodeLocationJobFacet(
            type="git", url=PROJECT_ROOT.as_uri(), path=source, version=_git_revision()
        ),
    }


def job(dataset: Dataset, settings: Settings, running_interval: int | None = None) -> Job:
    # A deployment reports periodically (RUNNING every `running_interval` s), each event complete.
    emission = (
        job_type_job.EmissionPattern(
            eventTrigger="PERIODIC",
            eventContentMode="COMPLETE_SNAPSHOT",
            windowDuration=running_interval,
        )
        if running_interval
        else None
    )
    return Job(
        namespace=settings.lineage_namespace,
        name=dataset.job.lineage_name,
        facets=_job_facets(
            dataset.job.processing_type,
            "DEPLOYMENT" if running_interval else "ASSET",
            f"Materializes {dataset.title} (Dagster asset `{dataset.key}`). {dataset.description}",
            dataset.job.source,
            emission,
        ),
    )


def check_job(check: Check, settings: Settings) -> Job:
    checked = DATASETS[check.dataset]
    return Job(
        namespace=settings.lineage_namespace,
        name=check.lineage_name,
        facets=_job_facets(
            "BATCH",
            "ASSET_CHECK",
            f"Dagster asset check `{check.name}` of {checked.title} (asset `{checked.key}`): {check.description}",
            check.source,
        ),
    )


def _orchestrator_job(settings: Settings) -> Job:
    return Job(
        namespace=settings.lineage_namespace,
        name=ORCHESTRATOR_JOB,
        facets={
            "jobType": job_type_job.JobTypeJobFacet(processingType="BATCH", integration=INTEGRATION, jobType="JOB"),
            "documentation": documentation_job.DocumentationJobFacet(
                description="Dagster runs of this project's assets; each run is tagged with its Dagster job and run id."
            ),
        },
    )


def _dagster_tags(dagster_run: DagsterRun) -> tags_run.TagsRunFacet:
    return tags_run.TagsRunFacet(
        tags=[
            tags_run.TagsRunFacetFields(key="dagster.job", value=dagster_run.job_name, source=INTEGRATION),
            tags_run.TagsRunFacetFields(key="dagster.run_id", value=dagster_run.run_id, source=INTEGRATION),
        ]
    )


def _engine_facet() -> processing_engine_run.ProcessingEngineRunFacet:
    return processing_engine_run.ProcessingEngineRunFacet(
        # The installed Dagster's version, read without importing the orchestrator into lineage/.
        version=importlib.metadata.version("dagster"),
        name="Dagster",
        openlineageAdapterVersion=openlineage.client.__version__,
    )


def parent_facet(dagster_run: DagsterRun, settings: Settings) -> parent_run.ParentRunFacet:
    namespace, name, run_id = settings.lineage_namespace, ORCHESTRATOR_JOB, dagster_run.lineage_run_id
    return parent_run.ParentRunFacet(
        run=parent_run.Run(runId=run_id),
        job=parent_run.Job(namespace=namespace, name=name),
        root=parent_run.Root(
            run=parent_run.RootRun(runId=run_id), job=parent_run.RootJob(namespace=namespace, name=name)
        ),
    )


def error_facet(error: BaseException, context: str | None = None) -> error_message_run.ErrorMessageRunFacet:
    message = f"{type(error).__name__}: {error}"
    return error_message_run.ErrorMessageRunFacet(
        message=f"{context}: {message}" if context else message,
        programmingLanguage="PYTHON",
        stackTrace="".join(traceback.format_exception(error)),
    )


def _run_facets(
    dagster_run: DagsterRun | None, settings: Settings, error: BaseException | JobError | None
) -> dict[str, RunFacet]:
    run_facets: dict[str, RunFacet] = {"processing_engine": _engine_facet()}
    if dagster_run is not None:
        run_facets["parent"] = parent_facet(dagster_run, settings)
    if isinstance(error, BaseException):
        run_facets["errorMessage"] = error_facet(error)
    elif error is not None:
        run_facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
            message=error.message, programmingLanguage=error.language, stackTrace=error.stack_trace
        )
    return run_facets


def asset_event(
    state: RunState,
    dataset: Dataset,
    dagster_run: DagsterRun | None,
    settings: Settings,
    facts: RunFacts = NO_FACTS,
    *,
    run_id: str | None = None,
    error: BaseException | JobError | None = None,
    event_time: dt.datetime | None = None,
    progress: StreamingProgressRunFacet | None = None,
    running_interval: int | None = None,
) -> RunEvent:
    """One lifecycle event of a lineage run of the dataset's producing job, with what the run's
    ``facts`` say it read and wrote: a materialization inside ``dagster_run``, or (``dagster_run``
    None, ``run_id`` given) a streaming deployment."""
    if dagster_run is not None:
        run_id = dagster_run.asset_run_id(dataset)
    elif run_id is None:
        raise ValueError(
            f"an event of a lineage run of {dataset.key} needs its Dagster run or, for a deployment, its run id"
        )
    run_facets = _run_facets(dagster_run, settings, error)
    if progress is not None:
        run_facets["streamingProgress"] = progress
    return RunEvent(
        eventType=state,
        eventTime=(event_time or dt.datetime.now(dt.UTC)).isoformat(),
        run=Run(runId=run_id, facets=run_facets),
        job=job(dataset, settings, running_interval),
        inputs=inputs(dataset, settings, facts.reads, (facts.observation or Observation()).foreign),
        outputs=[output(dataset, settings, facts)],
        producer=PRODUCER,
    )


def check_event(
    state: RunState,
    check: Check,
    dagster_run: DagsterRun,
    settings: Settings,
    *,
    assertions: tuple[Assertion, ...] = (),
    error: BaseException | None = None,
    event_time: dt.datetime | None = None,
) -> RunEvent:
    """A lifecycle event of one evaluation of ``check`` inside ``dagster_run``: a run reading the
    dataset it checks, with the evaluation's ``assertions`` on that input."""
    checked = DATASETS[check.dataset]
    identity = checked.identity(settings)
    return RunEvent(
        eventType=state,
        eventTime=(event_time or dt.datetime.now(dt.UTC)).isoformat(),
        run=Run(runId=dagster_run.check_run_id(check), facets=_run_facets(dagster_run, settings, error)),
        job=check_job(check, settings),
        inputs=[
            InputDataset(
                namespace=identity.namespace,
                name=identity.name,
                facets=dataset_facets(checked, settings),
                inputFacets={"dataQualityAssertions": assertions_facet(assertions)} if assertions else {},
            )
        ],
        outputs=[],
        producer=PRODUCER,
    )


def dagster_run_event(
    state: RunState,
    dagster_run: DagsterRun,
    settings: Settings,
    *,
    error_message: str | None = None,
    event_time: dt.datetime | None = None,
) -> RunEvent:
    """A lifecycle event of the Dagster run itself (the parent of its asset runs)."""
    facets: dict[str, RunFacet] = {"processing_engine": _engine_facet(), "tags": _dagster_tags(dagster_run)}
    if error_message:
        facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
            message=error_message, programmingLanguage="PYTHON"
        )
    return RunEvent(
        eventType=state,
        eventTime=(event_time or dt.datetime.now(dt.UTC)).isoformat(),
        run=Run(runId=dagster_run.lineage_run_id, facets=facets),
        job=_orchestrator_job(settings),
        producer=PRODUCER,
    )

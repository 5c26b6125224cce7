"""OpenLineage events for asset materializations, built from the dataset catalog.

One materialization of an asset is one OpenLineage run of the asset's producing job (the job the
catalog names for its dataset). Its inputs are the asset's upstream datasets and its output the
asset's own dataset, each named by the catalog, so the lineage graph is the asset graph. Every asset
run has a ``parent`` facet pointing at a run for the Dagster run itself: a run of the one
orchestrator job (``catalog.ORCHESTRATOR_JOB``), tagged with the Dagster job and run it stands for.

Run ids are UUIDv7 derived from the Dagster run (its id and start time) and the asset key: sending
a run's events again never creates a second run.
"""

from __future__ import annotations

import datetime as dt
import functools
import importlib.metadata
import subprocess
import traceback
from collections.abc import Mapping
from typing import Any

import openlineage.client
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    DatasetFacet,
    InputDatasetFacet,
    JobFacet,
    OutputDatasetFacet,
    RunFacet,
    column_lineage_dataset,
    data_quality_assertions_dataset,
    data_quality_metrics_dataset,
    dataset_version_dataset,
    datasource_dataset,
    documentation_job,
    error_message_run,
    job_type_job,
    lifecycle_state_change_dataset,
    output_statistics_output_dataset,
    ownership_job,
    parent_run,
    processing_engine_run,
    schema_dataset,
    set_producer,
    source_code_location_job,
    symlinks_dataset,
    tags_run,
)

from lineage_assets.datasets import (
    DATASETS,
    ORCHESTRATOR_JOB,
    OWNERS,
    Check,
    ColumnSource,
    Dataset,
    Identity,
    Kind,
    Transformation,
)
from lineage_assets.lineage.facets import (
    ColumnLineageUnobservedDatasetFacet,
    FilesWrittenOutputDatasetFacet,
    IcebergSnapshotInputDatasetFacet,
    IcebergSnapshotOutputDatasetFacet,
    KafkaOffsetsInputDatasetFacet,
    KafkaOffsetsOutputDatasetFacet,
    PartitionsWrittenOutputDatasetFacet,
    SchemaVersionsInputDatasetFacet,
    StreamingProgressRunFacet,
    TableVersionDatasetFacet,
    offsets_facet,
)
from lineage_assets.lineage.observed import Observation
from lineage_assets.lineage.run_facts import NO_FACTS, Assertion, DagsterRun, JobError, RunFacts, SourceRead
from lineage_assets.settings import PROJECT_ROOT, Settings

PRODUCER = f"urn:lineage_assets:{importlib.metadata.version('lineage_assets')}"
INTEGRATION = "DAGSTER"
set_producer(PRODUCER)


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


def dataset_facets(
    dataset: Dataset, settings: Settings, written: tuple[tuple[str, str], ...] | None = None
) -> dict[str, DatasetFacet]:
    """A dataset's facets: its schema (the catalog's; ``written``: the one a run's plan wrote, each
    column described where the catalog knows it), its source and symlinks."""
    described = {c.name: c for c in dataset.columns}
    columns = written if written is not None else tuple((c.name, c.type) for c in dataset.columns)
    return _identity_facets(
        dataset.identity(settings),
        schema_dataset.SchemaDatasetFacet(
            fields=[
                schema_dataset.SchemaDatasetFacetFields(
                    name=name, type=kind, description=described[name].description if name in described else None
                )
                for name, kind in columns
            ]
        ),
    )


def _identity_facets(identity: Identity, schema: schema_dataset.SchemaDatasetFacet | None) -> dict[str, DatasetFacet]:
    facets: dict[str, DatasetFacet] = {
        **({"schema": schema} if schema is not None else {}),
        "dataSource": datasource_dataset.DatasourceDatasetFacet(name=identity.namespace, uri=identity.namespace),
    }
    if identity.symlinks:
        facets["symlinks"] = symlinks_dataset.SymlinksDatasetFacet(
            identifiers=[
                symlinks_dataset.Identifier(namespace=s.namespace, name=s.name, type=s.type) for s in identity.symlinks
            ]
        )
    return facets


def deprecated_transformation_type(transformation: Transformation) -> str:
    """The facet's older per-column ``transformationType``: IDENTITY for an unchanged copy, else the
    type and subtype of the current ``transformations`` entry (e.g. ``DIRECT/AGGREGATION``)."""
    if (transformation.type, transformation.subtype) == ("DIRECT", "IDENTITY"):
        return "IDENTITY"
    return f"{transformation.type}/{transformation.subtype}"


def column_lineage_facet(
    lineage: dict[str, tuple[ColumnSource, ...]],
    settings: Settings,
    foreign: Mapping[str, Identity] | None = None,
    derivations: Mapping[str, str] | None = None,
) -> column_lineage_dataset.ColumnLineageDatasetFacet:
    """``lineage`` (per column, each input field with one transformation) as the facet: one input
    field per dataset and field, with all its transformations. ``foreign``: the names of inputs that
    are no dataset of the catalog; an input no name reaches (rows made in memory) is left out.
    ``derivations``: each column's own, first in its per-column description, so that a column made of
    no input field (COUNT(*), a record's metadata) says what it is computed as too."""
    fields = {}
    derivations = derivations or {}
    for column in dict.fromkeys([*lineage, *derivations]):
        sources = lineage.get(column, ())
        if not sources and column not in derivations:
            continue
        grouped: dict[tuple[str, str], list[Transformation]] = {}
        for source in sources:
            grouped.setdefault((source.dataset, source.column), []).append(source.transformation)
        inputs = []
        for (key, field_name), transformations in grouped.items():
            upstream = DATASETS[key].identity(settings) if key in DATASETS else (foreign or {}).get(key)
            if upstream is None:
                continue
            inputs.append(
                column_lineage_dataset.InputField(
                    namespace=upstream.namespace,
                    name=upstream.name,
                    field=field_name,
                    transformations=[
                        column_lineage_dataset.Transformation(
                            type=t.type, subtype=t.subtype, description=t.description, masking=False
                        )
                        for t in transformations
                    ],
                )
            )
        # Both spellings: the spec's current per-input `transformations`, and the deprecated
        # per-column fields, which are the only ones Marquez (0.51) stores and shows.
        merged = sorted(
            dict.fromkeys(source.transformation for source in sources), key=lambda t: (t.type, t.subtype, t.description)
        )
        own = [derivations[column]] if column in derivations else []
        fields[column] = column_lineage_dataset.Fields(
            inputFields=inputs,
            transformationType=", ".join(dict.fromkeys(map(deprecated_transformation_type, merged))),
            transformationDescription="; ".join(dict.fromkeys([*own, *(t.description for t in merged)])),
        )
    return column_lineage_dataset.ColumnLineageDatasetFacet(fields=fields)


def _read_facets(
    upstream: Dataset, read: SourceRead, settings: Settings
) -> tuple[dict[str, DatasetFacet], dict[str, InputDatasetFacet]]:
    """(dataset facets, input facets) of what a run read: a topic's offset ranges, or a table's
    snapshot; the schema and version of the newest readable writer version it read, every version it
    read, and its tests of the input."""
    facets: dict[str, DatasetFacet] = {}
    input_facets: dict[str, InputDatasetFacet] = {}
    if read.offsets is not None:
        input_facets["kafkaOffsets"] = offsets_facet(
            KafkaOffsetsInputDatasetFacet, upstream.identity(settings).name, read.offsets
        )
    if read.snapshot is not None:
        # The version of the rows read: of a compaction's snapshot, the one whose rows it holds, which a
        # run wrote (Marquez keeps a read's dataset facets on the table's latest version, the writer's).
        facets["version"] = TableVersionDatasetFacet(
            datasetVersion=read.snapshot.data or read.snapshot.version, schemaId=read.snapshot.schema_id
        )
        input_facets["icebergSnapshot"] = IcebergSnapshotInputDatasetFacet(
            snapshotId=int(read.snapshot.version),
            schemaId=read.snapshot.schema_id,
            dataSnapshotId=None if read.snapshot.data is None else int(read.snapshot.data),
        )
    newest = read.newest_readable()
    if newest is not None:
        described = {c.name: c.description for c in upstream.columns}
        facets["schema"] = schema_dataset.SchemaDatasetFacet(
            fields=[
                schema_dataset.SchemaDatasetFacetFields(
                    name=name,
                    type=kind,
                    description=described.get(name, f"added in {read.subject} version {newest['version']}"),
                )
                for name, kind in newest["fields"]
            ]
        )
        facets["version"] = dataset_version_dataset.DatasetVersionDatasetFacet(
            datasetVersion=f"{read.subject}:{newest['version']}"
        )
    if read.versions:
        if read.subject is None:  # the facet's schema requires it
            raise ValueError(f"the writer versions read of {read.dataset} name no registry subject")
        input_facets["schemaVersions"] = SchemaVersionsInputDatasetFacet(
            subject=read.subject,
            versions=[
                {
                    "version": v["version"],
                    "schemaId": v["schema_id"],
                    "records": v["records"],
                    "readable": v["readable"],
                    "problems": v["problems"],
                }
                for v in read.versions
            ],
        )
    if read.assertions:
        input_facets["dataQualityAssertions"] = assertions_facet(read.assertions)
    return facets, input_facets


def assertions_facet(
    assertions: tuple[Assertion, ...],
) -> data_quality_assertions_dataset.DataQualityAssertionsDatasetFacet:
    return data_quality_assertions_dataset.DataQualityAssertionsDatasetFacet(
        assertions=[
            data_quality_assertions_dataset.Assertion(
                assertion=a.kind,
                success=a.passed,
                column=a.column,
                name=a.check,
                description=a.description,
                expected=a.expected,
                actual=a.actual,
                severity="error" if a.blocking else "warn",
                content=a.sql,
                contentType="sql" if a.sql else None,
                params=None,
            )
            for a in assertions
        ]
    )


def inputs(
    dataset: Dataset,
    settings: Settings,
    reads: tuple[SourceRead, ...] = (),
    foreign: Mapping[str, Identity] | None = None,
) -> list[InputDataset]:
    """The datasets a run read: the asset's inputs, with what ``reads`` say the run read of each, and
    the ``foreign`` ones its plan read beside them (no dataset of the catalog: the lineage shows them)."""
    result = [
        InputDataset(namespace=identity.namespace, name=identity.name, facets=_identity_facets(identity, None))
        for identity in (foreign or {}).values()
    ]
    for key in dataset.upstream:
        upstream = DATASETS[key]
        identity = upstream.identity(settings)
        facets = dataset_facets(upstream, settings)
        input_facets: dict[str, InputDatasetFacet] = {}
        for read in reads:
            if read.dataset == key:
                read_facets, input_facets = _read_facets(upstream, read, settings)
                facets.update(read_facets)
        result.append(
            InputDataset(namespace=identity.namespace, name=identity.name, facets=facets, inputFacets=input_facets)
        )
    return result


def quality_facet(quality: dict[str, Any]) -> data_quality_metrics_dataset.DataQualityMetricsDatasetFacet:
    """A Spark job's ``quality`` report entry (``spark/support/quality.py``) as ``dataQualityMetrics``.

    What the numbers cover depends on the output: for an Iceberg table, the whole table as of the
    snapshot the run made (its ``datasetVersion``), read from the manifests' statistics; for the
    archive, the records this run wrote (observed as they were written) and the files and bytes it
    added. Per column: nulls, and min and max of numeric columns; no distinct counts, which neither
    source has exactly."""
    return data_quality_metrics_dataset.DataQualityMetricsDatasetFacet(
        rowCount=quality["rows"],
        bytes=quality["bytes"],
        fileCount=quality["files"],
        columnMetrics={
            name: data_quality_metrics_dataset.ColumnMetrics(
                nullCount=column.get("nulls"), min=column.get("min"), max=column.get("max"), quantiles=None
            )
            for name, column in quality["columns"].items()
        },
    )


def output(dataset: Dataset, settings: Settings, facts: RunFacts) -> OutputDataset:
    """The dataset a run writes, with what the run's ``facts`` say of it: the version it wrote (a
    registry version, an Iceberg snapshot), its quality metrics (``quality_facet``), what its columns
    came from as the job's plan says (``lineage/observed.py``; never the catalog's, which is what it is
    held against), the change it made and how much it wrote."""
    identity = dataset.identity(settings)
    observation = facts.observation or Observation()
    written = observation.derivations.schema if observation.derivations is not None else None
    facets = dataset_facets(dataset, settings, written or None)
    if facts.version is not None:
        facets["version"] = TableVersionDatasetFacet(
            datasetVersion=facts.version.version, schemaId=facts.version.schema_id
        )
    if facts.quality is not None:
        facets["dataQualityMetrics"] = quality_facet(facts.quality)
    if observation.column_lineage:
        derivations = observation.derivations.columns if observation.derivations is not None else {}
        facets["columnLineage"] = column_lineage_facet(
            observation.column_lineage, settings, observation.foreign, derivations
        )
    elif observation.missing:
        facets["columnLineageUnobserved"] = ColumnLineageUnobservedDatasetFacet(reason=observation.missing)
    if facts.lifecycle:
        facets["lifecycleStateChange"] = lifecycle_state_change_dataset.LifecycleStateChangeDatasetFacet(
            lifecycleStateChange=lifecycle_state_change_dataset.LifecycleStateChange[facts.lifecycle]
        )
    output_facets: dict[str, OutputDatasetFacet] = {}
    if facts.statistics:
        output_facets["outputStatistics"] = output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
            rowCount=facts.statistics.rows, size=facts.statistics.bytes, fileCount=facts.statistics.files
        )
    if facts.version is not None and dataset.kind is Kind.ICEBERG:
        output_facets["icebergSnapshot"] = IcebergSnapshotOutputDatasetFacet(
            snapshotId=int(facts.version.version),
            parentSnapshotId=None if facts.version.parent is None else int(facts.version.parent),
            parentDataSnapshotId=None if facts.version.parent_data is None else int(facts.version.parent_data),
        )
    if facts.offsets is not None:
        output_facets["kafkaOffsets"] = offsets_facet(KafkaOffsetsOutputDatasetFacet, identity.name, facts.offsets)
    if facts.partitions is not None:
        output_facets["partitionsWritten"] = PartitionsWrittenOutputDatasetFacet(partitions=list(facts.partitions))
    if facts.files is not None:
        output_facets["filesWritten"] = FilesWrittenOutputDatasetFacet(
            files=[{"path": f.path, "size": f.size} for f in facts.files]
        )
    return OutputDataset(namespace=identity.namespace, name=identity.name, facets=facets, outputFacets=output_facets)


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

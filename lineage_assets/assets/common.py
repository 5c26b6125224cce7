"""What every asset module shares: Dagster definitions and metadata from the dataset catalog, and
the one shape of a streaming job's asset."""

import dataclasses
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import dagster as dg

from lineage_assets.datasets import DATASETS, LINEAGE_CHECK, OWNERS, Check, Dataset
from lineage_assets.generator import ProduceReport
from lineage_assets.job_specs import JobSpec, R, Report, StreamReport, SupplierStatsReport, TableJobReport
from lineage_assets.lineage.observed import (
    ColumnLineage,
    Observation,
    ObservationError,
    disagreements,
    from_facet,
    observe_run,
)
from lineage_assets.lineage.queries import declared_graph, declared_impact
from lineage_assets.lineage.run_facts import (
    Assertion,
    DatasetVersion,
    OffsetRange,
    OutputStatistics,
    RunFacts,
    SourceRead,
    orders_read,
    topic_read,
)
from lineage_assets.lineage.spark_agent import AgentEvidence
from lineage_assets.preflight import require_services
from lineage_assets.resources.kafka import KafkaResource
from lineage_assets.resources.lineage import LineageResource
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.resources.spark_jobs import SparkJobsResource
from lineage_assets.settings import Settings
from lineage_assets.streaming.exclusive import exclusive_step

S = TypeVar("S", bound=StreamReport)  # the report of a streaming job


def asset_key(dataset: Dataset) -> dg.AssetKey:
    return dg.AssetKey(dataset.asset_key_path)


def column_schema(dataset: Dataset) -> dg.TableSchema:
    return dg.TableSchema(columns=[dg.TableColumn(c.name, c.type, description=c.description) for c in dataset.columns])


def column_lineage(lineage: ColumnLineage) -> dg.TableColumnLineage:
    """Dagster's column lineage: each column's input fields that are assets (Dagster has no transformation
    types, and names no dataset but an asset; the lineage events name the others)."""
    deps = {
        column: [
            dg.TableColumnDep(asset_key=asset_key(DATASETS[dataset]), column_name=name)
            for dataset, name in dict.fromkeys((s.dataset, s.column) for s in sources)
            if dataset in DATASETS
        ]
        for column, sources in lineage.items()
    }
    return dg.TableColumnLineage(deps_by_column={column: inputs for column, inputs in deps.items() if inputs})


def definition_metadata(dataset: Dataset) -> dict:
    """What an asset's definition says of its dataset whatever the environment: its columns, and the
    expected column lineage (the definition holds the expectation; a materialization, what ran)."""
    metadata: dict[str, object] = {"dagster/column_schema": column_schema(dataset)}
    if dataset.expected_lineage:
        metadata["dagster/column_lineage"] = column_lineage(dataset.expected_lineage)
    return metadata


# The declared graph, built once for all the assets of the definitions loaded for one ``settings``.
declared_graph_of = functools.cache(declared_graph)


def environment_metadata(settings: Settings) -> Callable[[dg.AssetSpec], dg.AssetSpec]:
    """What an asset's page says of its dataset in one environment, added to its spec where the
    definitions bind that environment (``dg.map_asset_specs``): its name in the lineage backend, and
    what depends on each of its columns."""

    def add(spec: dg.AssetSpec) -> dg.AssetSpec:
        dataset = DATASETS[spec.key.to_user_string()]
        identity = dataset.identity(settings)
        metadata: dict[str, object] = {"openlineage/namespace": identity.namespace, "openlineage/name": identity.name}
        impacted = declared_impact(dataset, settings, declared_graph_of(settings))
        if impacted:  # "what breaks if I change this column", on the asset's page
            metadata["lineage/impact"] = dg.MetadataValue.md(f"```\n{impacted}\n```")
        return spec.merge_attributes(metadata=metadata)

    return add


def asset_spec_arguments(dataset: Dataset, group: str) -> dict:
    """The @asset keyword arguments every asset takes from its dataset."""
    return {
        "key": asset_key(dataset),
        "description": dataset.description,
        "kinds": {dataset.kind.value, dataset.job.engine},
        "group_name": group,
        "owners": list(OWNERS),
        "metadata": definition_metadata(dataset),
        "deps": [asset_key(DATASETS[key]) for key in dataset.upstream],
        "pool": dataset.job.name,  # one run of a job at a time out of the run queue (``instance.py``)
    }


def check_arguments(check: Check) -> dict:
    """The @asset_check keyword arguments every separately evaluated check takes from the catalog."""
    return {"asset": asset_key(DATASETS[check.dataset]), "name": check.name, "description": check.description}


def observed_lineage(
    dataset: Dataset, report: Report, settings: Settings, log, agent: AgentEvidence | None = None
) -> Observation:
    """What the job observed of its write in its own plan, in the catalog's terms (``observe_run``);
    where it could not, logged. Where openlineage-spark reached the write too (``agent``), a
    difference between the two is logged: the agent labels a group-by key that passes through an alias
    as a direct copy into every column, so it is a witness, not the observation."""
    observation = observe_run(report.column_lineage, settings)
    if observation.missing:
        log.error(f"the column lineage of {dataset.key} was not observed: {observation.missing}")
    if observation.column_lineage is not None and agent is not None and agent.column_lineage:
        try:
            witness = from_facet(agent.column_lineage, dataset, settings, agent.columns)
        except ObservationError as error:
            log.warning(f"openlineage-spark's column lineage of {dataset.key} cannot be compared: {error}")
        else:
            if differences := disagreements(observation.column_lineage, witness):
                log.warning(
                    f"openlineage-spark's column lineage of {dataset.key} differs from the job's plan: "
                    + "; ".join(differences)
                )
    return observation


LINEAGE_CHECK_DESCRIPTION = (
    "What the run's Spark plan computes each column from (its derivations, the predicates and keys "
    "that decide its rows, the schema it writes) is the designed lineage (lineage_assets/designed_lineage.json)."
)


def lineage_check_spec(dataset: Dataset) -> dg.AssetCheckSpec:
    """The check each Spark-written asset's run evaluates from its observation; blocking where other
    assets are computed from it, which must not build on a derivation nobody reviewed."""
    downstream = any(dataset.key in other.upstream for other in DATASETS.values())
    return dg.AssetCheckSpec(
        LINEAGE_CHECK, asset=asset_key(dataset), blocking=downstream, description=LINEAGE_CHECK_DESCRIPTION
    )


def _lineage_check(dataset: Dataset, observation: Observation) -> dict:
    """``lineage_matches_catalog`` of one observation: each difference named with both derivations."""
    if observation.derivations is None and not observation.missing:
        return {
            "check_name": LINEAGE_CHECK,
            "passed": True,
            "description": "The run wrote nothing: no plan to hold against the designed lineage.",
        }
    gaps = observation.gaps(dataset)
    return {
        "check_name": LINEAGE_CHECK,
        "passed": not gaps,
        "severity": dg.AssetCheckSeverity.ERROR,
        "metadata": {
            "gaps": dg.MetadataValue.md("\n".join(f"- {gap}" for gap in gaps) or "none"),
            "gap_count": len(gaps),
        },
    }


def lineage_check_result(dataset: Dataset, observation: Observation) -> dg.AssetCheckResult:
    """The check as a materialization yields it."""
    return dg.AssetCheckResult(**_lineage_check(dataset, observation))


def lineage_check_evaluation(dataset: Dataset, observation: Observation) -> dg.AssetCheckEvaluation:
    """The check as a sensor reports it, for a deployment's commit (no run)."""
    blocking = lineage_check_spec(dataset).blocking
    return dg.AssetCheckEvaluation(
        asset_key=asset_key(dataset), blocking=blocking, **_lineage_check(dataset, observation)
    )


def run_metadata(report: StreamReport | SupplierStatsReport | TableJobReport, facts: RunFacts) -> dict:
    """What every Spark-backed materialization records in Dagster: rows read and written, the job's
    duration, the column lineage it observed (the same facts its lineage run reports)."""
    metadata: dict[str, object] = {
        "rows_in": report.rows_in,
        "rows_out": facts.statistics.rows if facts.statistics else None,
        "duration_seconds": report.duration_seconds,
    }
    if facts.column_lineage:
        metadata["dagster/column_lineage"] = column_lineage(facts.column_lineage)
    return {**metadata, **read_metadata(facts)}


def read_metadata(facts: RunFacts) -> dict:
    """Per input, the version the run read (a table's snapshot, a topic's offset ranges): on the
    asset's page, what a partition was computed from."""
    metadata = {}
    for read in facts.reads:
        if read.snapshot is not None:
            read_at = {"snapshot_id": read.snapshot.version, "schema_id": read.snapshot.schema_id}
            if read.snapshot.data is not None:  # a compaction's snapshot, holding the rows of this one
                read_at["data_snapshot_id"] = read.snapshot.data
            metadata[f"read/{read.dataset}"] = dg.MetadataValue.json(read_at)
        elif read.offsets is not None:
            metadata[f"read/{read.dataset}"] = dg.MetadataValue.json({"offsets": [r.as_dict() for r in read.offsets]})
    return metadata


def orders_read_by(settings: Settings, report: StreamReport, assertions: tuple[Assertion, ...] = ()) -> SourceRead:
    """What a streaming job's catch-up run read of the orders topic, by its report."""
    return orders_read(settings, report.schema_versions, assertions, report.start_offsets, report.end_offsets)


def generator_run(
    context: dg.AssetExecutionContext,
    dataset: Dataset,
    topic: str,
    value_schema: str,
    kafka: KafkaResource,
    lineage: LineageResource,
    ensure_topics: Callable[[], list[str]],
    produce: Callable[[], ProduceReport],
) -> dg.MaterializeResult:
    """One materialization of a generator's topic, in its lineage run: its topics ensured, its value
    schema registered, its records produced; what it wrote (the records, the schema version they were
    written with, their offsets) and what Dagster records of it."""
    started = time.monotonic()
    require_services(kafka.environment.settings)
    with lineage.asset_run(context, dataset) as run:
        created = ensure_topics()
        schema = kafka.register_value_schema(topic, value_schema)
        report = produce()
        run.complete(
            RunFacts(
                OutputStatistics(rows=report.produced),
                "CREATE" if topic in created else None,
                version=DatasetVersion(f"{schema.subject}:{schema.version}"),
                offsets=tuple(OffsetRange(p, first, after) for p, (first, after) in report.offsets.items()),
            )
        )
    context.log.info(f"produced {report.produced} records to {topic}: {report.by_kind}")
    return dg.MaterializeResult(
        metadata={
            "rows_out": report.produced,
            "records_by_kind": dg.MetadataValue.json(report.by_kind),
            "schema_id": schema.schema_id,
            "schema_version": schema.version,
            "topics_created": dg.MetadataValue.json(created),
            "kafka/end_offsets": dg.MetadataValue.json({topic: kafka.end_offsets(topic)}),
            "first_sent_at": report.first_sent_at or "",
            "last_sent_at": report.last_sent_at or "",
            "duration_seconds": round(time.monotonic() - started, 3),
        }
    )


def topic_read_by(dataset: Dataset, topic: str, report: StreamReport) -> SourceRead:
    """What a streaming job's catch-up run read of ``dataset``, the ``topic`` it is, by its report."""
    return topic_read(dataset, topic, report.schema_versions, (), report.start_offsets, report.end_offsets)


def run_table_job(
    context: dg.AssetExecutionContext,
    dataset: Dataset,
    job: JobSpec[R],
    spark_jobs: SparkJobsResource,
    lineage: LineageResource,
    facts: Callable[[R], RunFacts],
) -> tuple[R, RunFacts, Observation]:
    """One run of the batch ``job`` that writes ``dataset``'s table, in its lineage run (which
    openlineage-spark's events of the job join, a failed job's too): its report, the ``facts`` of
    it with what its plan was observed to compute, and that observation."""
    settings = spark_jobs.environment.settings
    require_services(settings)
    with lineage.asset_run(context, dataset, lifecycle="OVERWRITE") as run:
        application = run.spark_application()
        try:
            report = spark_jobs.run(job, log=context.log, extra_conf=application.conf())
        except BaseException as error:
            run.forward_spark_events(application, ended_by=error)  # Spark's own events, even from a failed job
            raise
        agent = run.forward_spark_events(application)
        observation = observed_lineage(dataset, report, settings, context.log, agent)
        made = dataclasses.replace(facts(report), observation=observation)
        run.complete(made)
    return report, made, observation


@dataclass(frozen=True)
class StreamingRun(Generic[S]):
    """One catch-up run of a streaming job, as its asset's ``outcome`` sees it."""

    context: dg.AssetExecutionContext
    settings: Settings
    report: S
    topics_created: list[str]


@dataclass(frozen=True)
class Outcome:
    """What a streaming asset's run read and wrote (for its lineage run), and what else it records in Dagster."""

    facts: RunFacts
    metadata: dict = field(default_factory=dict)
    check_results: tuple[dg.AssetCheckResult, ...] = ()


def streaming_asset(
    dataset: Dataset,
    job: Callable[[Settings], JobSpec[S]],
    group: str,
    outcome: Callable[[StreamingRun[S]], Outcome],
    *,
    topics: Callable[[Settings], tuple[str, ...]] = lambda settings: (),
    **asset_arguments,
) -> dg.AssetsDefinition:
    """The asset of ``dataset``'s streaming job run to catch up: refused while the job runs elsewhere
    (another catch-up run, or a deployment); otherwise one lineage run around ensuring ``topics``, the
    Spark job and its ``outcome``."""
    check_specs = [*asset_arguments.pop("check_specs", ()), lineage_check_spec(dataset)]

    @dg.asset(**asset_spec_arguments(dataset, group), check_specs=check_specs, **asset_arguments)
    def streaming(
        context: dg.AssetExecutionContext,
        environment: SettingsResource,
        kafka: KafkaResource,
        spark_jobs: SparkJobsResource,
        lineage: LineageResource,
    ) -> dg.MaterializeResult:
        settings = environment.settings
        with exclusive_step(settings.state_dir, dataset.job.name, dataset.key, context.run.run_id):
            require_services(settings)
            with lineage.asset_run(context, dataset) as run:
                created = kafka.ensure_topics(*topics(settings))
                report = spark_jobs.run(job(settings), log=context.log)
                result = outcome(StreamingRun(context, settings, report, created))
                observation = observed_lineage(dataset, report, settings, context.log)
                facts = dataclasses.replace(result.facts, observation=observation)
                run.complete(facts)
        return dg.MaterializeResult(
            metadata={
                **run_metadata(report, facts),
                "kafka/start_offsets": dg.MetadataValue.json(report.start_offsets or {}),
                "kafka/end_offsets": dg.MetadataValue.json(report.end_offsets or {}),
                "schema_versions": dg.MetadataValue.json(
                    [{k: v for k, v in version.items() if k != "fields"} for version in report.schema_versions]
                ),
                **result.metadata,
            },
            check_results=[*result.check_results, lineage_check_result(dataset, observation)],
        )

    return streaming

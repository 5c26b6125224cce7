"""The datasets of a run's events, built from the dataset catalog: its inputs and output, each named
by the catalog, with the facets of what the run's facts say it read and wrote (offset ranges,
snapshots, writer versions, quality, column lineage, tests)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from openlineage.client.event_v2 import InputDataset, OutputDataset
from openlineage.client.facet_v2 import (
    DatasetFacet,
    InputDatasetFacet,
    OutputDatasetFacet,
    column_lineage_dataset,
    data_quality_assertions_dataset,
    data_quality_metrics_dataset,
    dataset_version_dataset,
    datasource_dataset,
    lifecycle_state_change_dataset,
    output_statistics_output_dataset,
    schema_dataset,
    symlinks_dataset,
)

from lineage_assets.column_lineage import ColumnSource, Transformation
from lineage_assets.datasets import DATASETS, Dataset, Identity, Kind
from lineage_assets.lineage.facets import (
    ColumnLineageUnobservedDatasetFacet,
    FilesWrittenOutputDatasetFacet,
    IcebergSnapshotInputDatasetFacet,
    IcebergSnapshotOutputDatasetFacet,
    KafkaOffsetsInputDatasetFacet,
    KafkaOffsetsOutputDatasetFacet,
    PartitionsWrittenOutputDatasetFacet,
    SchemaVersionsInputDatasetFacet,
    TableVersionDatasetFacet,
    offsets_facet,
)
from lineage_assets.lineage.observed import Observation
from lineage_assets.lineage.run_facts import Assertion, RunFacts, SourceRead
from lineage_assets.settings import Settings


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
            datasetVersion=read.snapshot.rows_of, schemaId=read.snapshot.schema_id
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

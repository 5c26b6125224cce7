"""The project's own OpenLineage facets, as openlineage-python defines its own: attrs classes of
its facet types, each with the JSON schema this package ships (``schemas/``), whose ``$id`` carries
``VERSION``. ``run_datasets`` and ``events`` put them on the runs' datasets and runs; ``PRODUCER`` is
the producer every event and facet names."""

from __future__ import annotations

import importlib.metadata
from typing import TypedDict, TypeVar

import attr
from openlineage.client.facet_v2 import (
    DatasetFacet,
    InputDatasetFacet,
    OutputDatasetFacet,
    RunFacet,
    dataset_version_dataset,
    set_producer,
)

from lineage_assets.lineage.run_facts import OffsetMap, OffsetRange

# The version in the $id of the project's own facet schemas (lineage/schemas/*.json), not the package's.
VERSION = "0.1.0"

# What every event and facet names as its producer: set before any facet is built, as each takes it then.
PRODUCER = f"urn:lineage_assets:{importlib.metadata.version('lineage_assets')}"
set_producer(PRODUCER)


@attr.define
class StreamingProgressRunFacet(RunFacet):
    """Progress of a streaming deployment at a RUNNING event (its schema: schemas/ in this package)."""

    processedRows: int  # noqa: N815  (OpenLineage facets use camelCase fields)
    inputRowsPerSecond: float | None = attr.field(default=None)  # noqa: N815
    processedRowsPerSecond: float | None = attr.field(default=None)  # noqa: N815
    lastBatchDurationMs: int | None = attr.field(default=None)  # noqa: N815
    lastBatchTime: str | None = attr.field(default=None)  # noqa: N815
    sourceOffsets: OffsetMap | None = attr.field(default=None)  # noqa: N815

    @staticmethod
    def _get_schema() -> str:
        return f"urn:lineage_assets:schema:StreamingProgressRunFacet:{VERSION}"


class SchemaVersionEntry(TypedDict):
    """One writer version of the records a run read, in ``SchemaVersionsInputDatasetFacet``."""

    version: int
    schemaId: int  # noqa: N815
    records: int
    readable: bool
    problems: list[str]


@attr.define
class SchemaVersionsInputDatasetFacet(InputDatasetFacet):
    """The registered writer versions of the records a run read from an input: per version the
    records read, whether the pipeline can read it, and why not (``source_schemas``)."""

    subject: str
    versions: list[SchemaVersionEntry]

    @staticmethod
    def _get_schema() -> str:
        return f"urn:lineage_assets:schema:SchemaVersionsInputDatasetFacet:{VERSION}"


VERSION_FACETS = f"urn:lineage_assets:schema:VersionFacets:{VERSION}"


@attr.define
class KafkaOffsetsInputDatasetFacet(InputDatasetFacet):
    """The records of a topic a run read: per partition, its first offset and the offset after its
    last. A topic has no version of its own; this range is the part of it the run saw."""

    topic: str
    partitions: list[dict[str, int]]  # partition, start, end

    @staticmethod
    def _get_schema() -> str:
        return f"{VERSION_FACETS}#/$defs/KafkaOffsetsInputDatasetFacet"


@attr.define
class KafkaOffsetsOutputDatasetFacet(OutputDatasetFacet):
    """The records a run wrote to a topic, as ``KafkaOffsetsInputDatasetFacet`` spells a read."""

    topic: str
    partitions: list[dict[str, int]]

    @staticmethod
    def _get_schema() -> str:
        return f"{VERSION_FACETS}#/$defs/KafkaOffsetsOutputDatasetFacet"


@attr.define
class IcebergSnapshotInputDatasetFacet(InputDatasetFacet):
    """The snapshot of an Iceberg table a run's scan read. An input facet, kept with the run (the
    input's ``version`` facet says it too, but Marquez keeps a read's dataset facets with the
    table's latest version, not with the run)."""

    snapshotId: int  # noqa: N815
    schemaId: int | None = attr.field(default=None)  # noqa: N815
    # Whose rows it holds, when a compaction made it (a ``replace`` keeps its parent's rows).
    dataSnapshotId: int | None = attr.field(default=None)  # noqa: N815

    @staticmethod
    def _get_schema() -> str:
        return f"{VERSION_FACETS}#/$defs/IcebergSnapshotInputDatasetFacet"


@attr.define
class IcebergSnapshotOutputDatasetFacet(OutputDatasetFacet):
    """The snapshot of an Iceberg table a run's last commit made, and the one its first commit built
    on: which versions hold what the run wrote follows from these, also after a table is rolled back
    or rebuilt (a later snapshot holds the run's rows only if the run's snapshot is its ancestor)."""

    snapshotId: int  # noqa: N815
    parentSnapshotId: int | None = attr.field(default=None)  # noqa: N815  none: the run began the table
    parentDataSnapshotId: int | None = attr.field(default=None)  # noqa: N815  whose rows the parent holds, if other

    @staticmethod
    def _get_schema() -> str:
        return f"{VERSION_FACETS}#/$defs/IcebergSnapshotOutputDatasetFacet"


class FileEntry(TypedDict):
    """One data file a run added, in ``FilesWrittenOutputDatasetFacet``."""

    path: str  # below the dataset's location
    size: int


@attr.define
class FilesWrittenOutputDatasetFacet(OutputDatasetFacet):
    """The data files a run added to a dataset stored as files (the raw archive), with their sizes."""

    files: list[FileEntry]

    @staticmethod
    def _get_schema() -> str:
        return f"urn:lineage_assets:schema:FilesWrittenOutputDatasetFacet:{VERSION}"


@attr.define
class PartitionsWrittenOutputDatasetFacet(OutputDatasetFacet):
    """The partitions (UTC days, the assets' daily partition keys) a run wrote rows into."""

    partitions: list[str]

    @staticmethod
    def _get_schema() -> str:
        return f"urn:lineage_assets:schema:PartitionsWrittenOutputDatasetFacet:{VERSION}"


@attr.define
class TableVersionDatasetFacet(dataset_version_dataset.DatasetVersionDatasetFacet):
    """``version``: a table's version (an Iceberg snapshot id, as openlineage-spark names it) with
    the id of its schema beside it (the facet's schema takes additional properties)."""

    schemaId: int | None = attr.field(default=None)  # noqa: N815


@attr.define
class ColumnLineageUnobservedDatasetFacet(DatasetFacet):
    """A write whose column lineage the job's plan did not give, and why: unknown, not the last known."""

    reason: str

    @staticmethod
    def _get_schema() -> str:
        return f"urn:lineage_assets:schema:ColumnLineageUnobservedDatasetFacet:{VERSION}"


KafkaOffsetsFacet = TypeVar("KafkaOffsetsFacet", KafkaOffsetsInputDatasetFacet, KafkaOffsetsOutputDatasetFacet)


def offsets_facet(kind: type[KafkaOffsetsFacet], topic: str, ranges: tuple[OffsetRange, ...]) -> KafkaOffsetsFacet:
    """``ranges`` of ``topic`` as a ``KafkaOffsetsInputDatasetFacet`` or ``KafkaOffsetsOutputDatasetFacet``."""
    return kind(topic=topic, partitions=[r.as_dict() for r in ranges])

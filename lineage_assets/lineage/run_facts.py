"""What a run read and wrote, as the assets, the deployments and the Spark jobs' reports tell it: the
value types the lineage events are built from (``events``), and the ids of the runs they belong to."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from openlineage.client.uuid import generate_static_uuid

from lineage_assets.column_lineage import ColumnSource
from lineage_assets.datasets import ORDERS, Check, Dataset
from lineage_assets.lineage.observed import Observation
from lineage_assets.settings import Settings
from lineage_assets.source_schemas import value_subject

# Spark's offsets of a query's progress: topic -> partition (its number as text) -> offset.
OffsetMap = Mapping[str, Mapping[str, int]]


@dataclass(frozen=True)
class DagsterRun:
    """The Dagster run an asset materialization belongs to (the parent of its lineage run)."""

    run_id: str
    job_name: str
    started_at: dt.datetime

    @property
    def lineage_run_id(self) -> str:
        return str(generate_static_uuid(self.started_at, f"dagster-run/{self.run_id}".encode()))

    def asset_run_id(self, dataset: Dataset) -> str:
        return str(generate_static_uuid(self.started_at, f"dagster-run/{self.run_id}/asset/{dataset.key}".encode()))

    def check_run_id(self, check: Check) -> str:
        return str(generate_static_uuid(self.started_at, f"dagster-run/{self.run_id}/check/{check.name}".encode()))


@dataclass(frozen=True)
class JobError:
    """An error reported by a process other than this one (a deployment's runner or guard, reading
    its Spark job's log), as text."""

    message: str
    stack_trace: str | None = None
    language: str = "PYTHON"  # the PySpark job's, whose log names the JVM's exceptions as its causes


@dataclass(frozen=True)
class OutputStatistics:
    rows: int | None = None
    bytes: int | None = None
    files: int | None = None


@dataclass(frozen=True)
class DatasetVersion:
    """What a run read or wrote: a registry version (``orders-value:2``), an Iceberg snapshot and
    schema id, and of a snapshot written its ``parent``: the table's snapshot the run's first commit
    built on (None: the table had none). A compaction's snapshot (a ``replace``) holds the rows of
    another, which ``data`` names for a snapshot read and ``parent_data`` for a parent (None: its own)."""

    version: str
    schema_id: int | None = None
    parent: str | None = None
    data: str | None = None
    parent_data: str | None = None

    @property
    def rows_of(self) -> str:
        """The version whose rows this one holds: itself, unless a compaction made it."""
        return self.data or self.version

    @property
    def parent_rows_of(self) -> str | None:
        """The version whose rows its parent holds: the parent, unless a compaction made it."""
        return self.parent_data or self.parent


def snapshot_version(snapshot_id: int | None) -> str | None:
    """An Iceberg snapshot id as a version (the text of ``datasetVersion``); None for none."""
    return None if snapshot_id is None else str(snapshot_id)


def snapshot_written(
    snapshot_id: int | None,
    schema_id: int | None,
    parent_snapshot_id: int | None,
    parent_data_snapshot_id: int | None = None,
) -> DatasetVersion | None:
    """The version of an Iceberg table a run left (None: the table has no snapshot yet)."""
    if snapshot_id is None:
        return None
    return DatasetVersion(
        str(snapshot_id),
        schema_id,
        snapshot_version(parent_snapshot_id),
        parent_data=snapshot_version(parent_data_snapshot_id),
    )


@dataclass(frozen=True)
class OffsetRange:
    """The records of one partition of a topic between two offsets: ``start`` is the first, ``end``
    the one after the last (Kafka's and Spark's end offset)."""

    partition: int
    start: int
    end: int

    def as_dict(self) -> dict[str, int]:
        """As the offsets facets, Dagster's metadata and provenance's answers spell a range."""
        return {"partition": self.partition, "start": self.start, "end": self.end}

    @classmethod
    def from_dict(cls, spelled: Mapping[str, int]) -> OffsetRange:
        return cls(spelled["partition"], spelled["start"], spelled["end"])


def offset_ranges(topic: str, start: OffsetMap | None, end: OffsetMap | None) -> tuple[OffsetRange, ...]:
    """The ranges of ``topic`` between two of Spark's offset maps (``{topic: {partition: offset}}``,
    as a query's progress reports them); a partition with no record between them is left out."""
    first, after = (start or {}).get(topic) or {}, (end or {}).get(topic) or {}
    ranges = (
        OffsetRange(int(partition), int(first.get(partition, 0)), int(offset)) for partition, offset in after.items()
    )
    return tuple(sorted((r for r in ranges if r.end > r.start), key=lambda r: r.partition))


@dataclass(frozen=True)
class WrittenFile:
    path: str  # below the dataset's location
    size: int


@dataclass(frozen=True)
class Assertion:
    """One test of a dataset (or one of its columns) and its outcome: an entry of ``dataQualityAssertions``."""

    check: str  # the Dagster asset check that made it
    kind: str  # the facet's classification: not_null, range, row_count, unique, schema_compatible
    passed: bool
    description: str
    column: str | None = None  # None: the dataset as a whole
    expected: str | None = None
    actual: str | None = None
    blocking: bool = False
    sql: str | None = None  # the query that tested it, if one did


@dataclass(frozen=True)
class SourceRead:
    """What a run read of one input dataset: which part of it (a topic's offset ranges, a table's
    snapshot), the writer versions of its records (a Spark job's ``schema_versions`` report entries)
    and the tests it made of them."""

    dataset: str  # a key of DATASETS
    subject: str | None = None  # the registry subject of a topic's values
    versions: tuple[dict[str, Any], ...] = ()
    assertions: tuple[Assertion, ...] = ()
    offsets: tuple[OffsetRange, ...] | None = None  # a topic: the records read
    snapshot: DatasetVersion | None = None  # a table: the snapshot the scan read

    def newest_readable(self) -> dict[str, Any] | None:
        readable = [v for v in self.versions if v["readable"]]
        return max(readable, key=lambda v: v["version"]) if readable else None


@dataclass(frozen=True)
class RunFacts:
    """What one run of a dataset's job read and wrote, as its lineage reports it: what the job's report
    becomes (in its asset, or a deployment's folder), what a lineage run completes with, and what
    ``asset_event`` builds the run's inputs and output from."""

    statistics: OutputStatistics | None = None
    lifecycle: str | None = None  # the change it made to the dataset: CREATE, OVERWRITE
    version: DatasetVersion | None = None
    quality: dict[str, Any] | None = None  # the job's ``quality`` report entry
    reads: tuple[SourceRead, ...] = ()
    observation: Observation | None = None  # what the job's plan says it computed the columns from
    offsets: tuple[OffsetRange, ...] | None = None  # a topic: the records written
    files: tuple[WrittenFile, ...] | None = None  # a dataset of files: those added
    partitions: tuple[str, ...] | None = None  # a partitioned table: the days it wrote rows into

    @property
    def column_lineage(self) -> dict[str, tuple[ColumnSource, ...]] | None:
        return self.observation.column_lineage if self.observation is not None else None


NO_FACTS = RunFacts()  # a run's START, before it has read or written anything


def topic_read(
    dataset: Dataset,
    topic: str,
    versions: Iterable[dict[str, Any]] | None,
    assertions: tuple[Assertion, ...] = (),
    start_offsets: OffsetMap | None = None,
    end_offsets: OffsetMap | None = None,
) -> SourceRead:
    """What a run read of ``dataset``, the ``topic`` it is: the records between the offsets its first
    batch started at and its last batch ended at (Spark's offset maps), the writer versions of a Spark
    job's report or a deployment's progress (``schema_versions`` entries), and its tests of them."""
    return SourceRead(
        dataset=dataset.key,
        subject=value_subject(topic),
        versions=tuple(versions or ()),
        assertions=assertions,
        offsets=None if end_offsets is None else offset_ranges(topic, start_offsets, end_offsets),
    )


def orders_read(
    settings: Settings,
    versions: Iterable[dict[str, Any]] | None,
    assertions: tuple[Assertion, ...] = (),
    start_offsets: OffsetMap | None = None,
    end_offsets: OffsetMap | None = None,
) -> SourceRead:
    """What a run read of the orders topic (``topic_read``)."""
    return topic_read(ORDERS, settings.orders_topic, versions, assertions, start_offsets, end_offsets)


def table_read(
    table: Dataset, snapshot_id: int | None, schema_id: int | None = None, data_snapshot_id: int | None = None
) -> SourceRead:
    """What a run read of a table: one snapshot of it (none while the table had none)."""
    if snapshot_id is None:
        return SourceRead(dataset=table.key)
    snapshot = DatasetVersion(str(snapshot_id), schema_id, data=snapshot_version(data_snapshot_id))
    return SourceRead(dataset=table.key, snapshot=snapshot)

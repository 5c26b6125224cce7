"""The Spark jobs: what each needs (script, arguments, checkpoint) and what it reports, from one
:class:`Settings` and the dataset catalog, without Dagster.

The assets' catch-up runs and the streaming deployments launch the same specs. The scripts under
``spark/`` write their report as the class named here (``spark/support/reports.write_report``) and callers read
it back as one, so each report key is spelled once.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from lineage_assets.connections import kafka_arguments
from lineage_assets.datasets import (
    ARCHIVE,
    DATASETS,
    LAKEHOUSE_ORDERS,
    LAKEHOUSE_SUPPLIERS,
    SUPPLIER_STATS,
    SUPPLIER_STATS_LIVE,
    Dataset,
    Kind,
    iceberg_table_name,
    orders_reader_schema_json,
    suppliers_avro_schema_json,
)
from lineage_assets.settings import Settings
from lineage_assets.source_schemas import dead_letter_topic_of, value_subject

# Jobs print their progress on lines with this prefix; a caller forwards them to its log.
PROGRESS_PREFIX = "progress: "


# --- reports ------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Report:
    duration_seconds: float
    # What the written columns came from as Spark planned them (``spark/lineage.report``); None when
    # the run wrote nothing it could observe (a catch-up run without a batch).
    column_lineage: dict | None = None

    @classmethod
    def read(cls, path: Path):
        """The report a job wrote; a key this class does not name is an error (a job and its caller disagree)."""
        return cls(**json.loads(path.read_text()))

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(dataclasses.asdict(self), indent=2, default=str))


@dataclass(frozen=True, kw_only=True)
class StreamReport(Report):
    """What every Structured Streaming job reading `orders` reports: its batches, the rows and Kafka
    offsets they covered, and the writer schema versions of the records read."""

    batches: int
    rows_in: int
    start_offsets: dict | None
    end_offsets: dict | None
    schema_versions: list[dict]

    @property
    def consumed_records(self) -> int:
        """Records the job's checkpoint now covers in the source (sum of end offsets over partitions)."""
        return sum(sum(partitions.values()) for partitions in (self.end_offsets or {}).values())


@dataclass(frozen=True, kw_only=True)
class ArchiveReport(StreamReport):
    rows_written: int
    files_written: int
    bytes_written: int
    files_total: int
    quality: dict  # of the records this run archived
    files_added: list[list] = field(default_factory=list)  # [path below the archive's location, bytes]


@dataclass(frozen=True, kw_only=True)
class LiveStatsReport(StreamReport):
    windows_written: int
    # The output topic's end offsets when the run began and when it ended (Spark's offset maps).
    output_start_offsets: dict
    output_end_offsets: dict


@dataclass(frozen=True, kw_only=True)
class IngestionReport(StreamReport):
    rows_written: int
    dead_letters: int
    dead_letter_reasons: dict[str, int]
    batches_replayed: int
    schema_incompatible: int
    dead_letters_replayed: int
    days: list[str]
    table_created: bool
    snapshot_id: int | None
    parent_snapshot_id: int | None  # the table's snapshot when the run began, which its first commit built on
    parent_data_snapshot_id: int | None = None  # whose rows that snapshot holds, when a compaction made it
    schema_id: int | None
    table_rows: int
    quality: dict | None  # the whole table after the run, from its manifests


@dataclass(frozen=True, kw_only=True)
class SupplierStatsReport(Report):
    day: str | None  # None: no day given and the source has none
    rows_in: int
    rows_written: int
    table_created: bool
    source_snapshot_id: int | None = None  # the snapshot of the source table the run read (None: it had none)
    source_schema_id: int | None = None
    source_data_snapshot_id: int | None = None  # whose rows the snapshot read holds, when a compaction made it
    snapshot_id: int | None = None
    parent_snapshot_id: int | None = None  # the snapshot the run's commit replaced its day in
    schema_id: int | None = None
    files_written: int = 0
    bytes_written: int = 0
    quality: dict | None = None  # the whole table after the run, from its manifests
    totals: list[dict] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class SuppliersIngestionReport(StreamReport):
    rows_written: int  # supplier states given to the merge (each supplier's latest of a batch)
    dead_letters: int
    dead_letter_reasons: dict[str, int]
    table_created: bool
    snapshot_id: int | None
    parent_snapshot_id: int | None  # the table's snapshot when the run began, which its first commit built on
    schema_id: int | None
    table_rows: int
    quality: dict | None  # the whole table after the run, from its manifests


@dataclass(frozen=True, kw_only=True)
class TableJobReport(Report):
    """What ``spark/table_job.py`` computed for one day of a ``DailyTable``."""

    day: str
    # Per input, in the dataset's order: the snapshot read, its schema id, whose rows it holds (after a
    # compaction), which state it is (``as_of``), and its records.
    reads: list[dict]
    rows_in: int  # records in the snapshots read
    rows_written: int
    table_created: bool
    snapshot_id: int | None = None
    parent_snapshot_id: int | None = None
    schema_id: int | None = None
    files_written: int = 0
    bytes_written: int = 0
    quality: dict | None = None
    rows: list[dict] = field(default_factory=list)  # the day's rows written (the first 500)
    sums: dict[str, dict] = field(default_factory=dict)  # per reconciled column, the day's written and read sums


@dataclass(frozen=True, kw_only=True)
class LakehouseUpkeepReport(Report):
    # Per table compacted that exists: table, closed_before, current_snapshot_id and the
    # rewrite_data_files procedure's counts (rewritten_data_files_count, added_data_files_count, ...).
    compacted: list[dict]
    # Per table that exists: table, snapshots_before, snapshots_after, current_snapshot_id and the
    # expire_snapshots procedure's counts of the files it deleted (deleted_data_files_count, ...).
    expired: list[dict]
    # Per table that exists: table, older_than and the files remove_orphan_files deleted.
    orphans: list[dict]


R = TypeVar("R", bound=Report)


# --- specs --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobSpec(Generic[R]):
    """One run of a job: the dataset it writes (its script and job name), its arguments, and the
    class of its report."""

    dataset: Dataset
    arguments: tuple[str, ...]
    report: type[R]

    @property
    def script(self) -> str:
        return self.dataset.job.source


def checkpoint(settings: Settings, dataset: Dataset) -> str:
    """A streaming job's checkpoint (a folder, or a URL Spark writes to): its catch-up runs and its
    deployment continue from it."""
    return f"{(settings.checkpoint_location or str(settings.state_dir / 'checkpoints')).rstrip('/')}/{dataset.job.name}"


def archive_location(settings: Settings) -> str:
    identity = ARCHIVE.identity(settings)
    return f"{identity.namespace}/{identity.name}"


def table_columns(dataset: Dataset) -> str:
    """The catalog's columns as a Spark SQL column list, for the job that creates the table."""
    return ", ".join(f"{column.name} {column.type}" for column in dataset.columns)


def _topic_source(settings: Settings, dataset: Dataset, topic: str, reader_schema: str) -> tuple[str, ...]:
    """Read ``topic`` as ``reader_schema`` (the catalog's); the job judges each registered writer
    version of the topic's subject against it."""
    if settings.max_records_per_batch < 0:
        raise ValueError(
            f"LINEAGE_ASSETS_MAX_RECORDS_PER_BATCH={settings.max_records_per_batch}: the most records "
            "a micro-batch reads is 0 (all that are available) or a positive number"
        )
    return (
        "--bootstrap-servers",
        settings.kafka_servers,
        *kafka_arguments(settings),
        "--topic",
        topic,
        "--value-schema",
        reader_schema,
        "--registry-url",
        settings.schema_registry_url,
        "--subject",
        value_subject(topic),
        "--checkpoint",
        checkpoint(settings, dataset),
        *(("--max-records-per-batch", str(settings.max_records_per_batch)) if settings.max_records_per_batch else ()),
    )


def _orders_source(settings: Settings, dataset: Dataset) -> tuple[str, ...]:
    return _topic_source(settings, dataset, settings.orders_topic, orders_reader_schema_json())


def archive_job(settings: Settings) -> JobSpec[ArchiveReport]:
    return JobSpec(ARCHIVE, (*_orders_source(settings, ARCHIVE), "--path", archive_location(settings)), ArchiveReport)


def live_stats_job(settings: Settings) -> JobSpec[LiveStatsReport]:
    return JobSpec(
        SUPPLIER_STATS_LIVE,
        (*_orders_source(settings, SUPPLIER_STATS_LIVE), "--output-topic", settings.supplier_stats_topic),
        LiveStatsReport,
    )


def ingestion_job(settings: Settings) -> JobSpec[IngestionReport]:
    return JobSpec(
        LAKEHOUSE_ORDERS,
        (
            *_orders_source(settings, LAKEHOUSE_ORDERS),
            "--table",
            iceberg_table_name(settings, "orders"),
            "--columns",
            table_columns(LAKEHOUSE_ORDERS),
            "--dead-letter-topic",
            settings.dead_letter_topic,
            "--job-name",
            LAKEHOUSE_ORDERS.job.name,
        ),
        IngestionReport,
    )


def supplier_stats_job(settings: Settings, day: dt.date | str) -> JobSpec[SupplierStatsReport]:
    return JobSpec(
        SUPPLIER_STATS,
        (
            "--source",
            iceberg_table_name(settings, "orders"),
            "--target",
            iceberg_table_name(settings, "supplier_stats"),
            "--columns",
            table_columns(SUPPLIER_STATS),
            "--day",
            str(day),
        ),
        SupplierStatsReport,
    )


def suppliers_ingestion_job(settings: Settings) -> JobSpec[SuppliersIngestionReport]:
    return JobSpec(
        LAKEHOUSE_SUPPLIERS,
        (
            *_topic_source(settings, LAKEHOUSE_SUPPLIERS, settings.suppliers_topic, suppliers_avro_schema_json()),
            "--table",
            iceberg_table_name(settings, "suppliers"),
            "--columns",
            table_columns(LAKEHOUSE_SUPPLIERS),
            "--dead-letter-topic",
            dead_letter_topic_of(settings.suppliers_topic),
            "--job-name",
            LAKEHOUSE_SUPPLIERS.job.name,
        ),
        SuppliersIngestionReport,
    )


def table_job(settings: Settings, dataset: Dataset, day: dt.date | str) -> JobSpec[TableJobReport]:
    """One day of a ``DailyTable``: its transform over its inputs' tables, into its own."""
    computed = dataset.computed_by
    if computed is None:
        raise ValueError(f"{dataset.key} is not computed by a transform of the catalog (no DailyTable)")
    inputs = [DATASETS[key] for key in dataset.inputs]
    return JobSpec(
        dataset,
        (
            *("--transform", computed.transform),
            *(
                argument
                for read in inputs
                for argument in (
                    "--input-as-of-day" if read.key in computed.as_of_day else "--input",
                    iceberg_table_name(settings, read.table),
                )
            ),
            *("--target", iceberg_table_name(settings, dataset.table)),
            *("--columns", table_columns(dataset)),
            *("--partition-column", computed.partition_column),
            *("--day", str(day)),
            *(
                argument
                for r in computed.reconciles
                for argument in ("--reconcile", f"{r.column}={dataset.inputs.index(r.input)}:{r.input_column}")
            ),
        ),
        TableJobReport,
    )


def expired_tables() -> list[Dataset]:
    """The tables whose old snapshots the upkeep expires: every Iceberg dataset but those a
    ``DailyTable`` reads as of a day, whose snapshots are their history."""
    kept = {key for d in DATASETS.values() if d.computed_by for key in d.computed_by.as_of_day}
    return [d for d in DATASETS.values() if d.kind == Kind.ICEBERG and d.key not in kept]


LAKEHOUSE_UPKEEP_SCRIPT = "spark/lakehouse_upkeep.py"


def lakehouse_upkeep_arguments(settings: Settings, now: dt.datetime) -> tuple[str, ...]:
    """``spark/lakehouse_upkeep.py``'s arguments: `orders`' days before ``now``'s UTC day compacted
    (the ingestion writes small files; `supplier_stats` rewrites a day whole); the ``expired_tables``'
    snapshots older than the settings' retention before ``now`` expired, all but the newest
    ``snapshots_kept``, and their unreferenced files older than the settings' orphan age deleted."""
    now = now.astimezone(dt.UTC)

    def before_now(hours: int) -> str:
        return (now - dt.timedelta(hours=hours)).replace(tzinfo=None).isoformat(timespec="seconds")

    return (
        *("--compact", iceberg_table_name(settings, "orders")),
        *("--closed-before", now.date().isoformat()),
        *(
            argument
            for table in expired_tables()
            for argument in ("--table", iceberg_table_name(settings, table.table))
        ),
        *("--older-than", before_now(settings.snapshot_retention_hours)),
        *("--retain-last", str(settings.snapshots_kept)),
        *("--orphans-older-than", before_now(settings.orphan_file_age_hours)),
    )


# The jobs that also run as continuous deployments, by the key of the dataset they write.
STREAMING_JOBS: dict[str, Callable[[Settings], JobSpec]] = {
    ARCHIVE.key: archive_job,
    SUPPLIER_STATS_LIVE.key: live_stats_job,
    LAKEHOUSE_ORDERS.key: ingestion_job,
}

"""What the ``spark-submit`` entry points share: arguments, the Kafka source, query runs, reports.

A job reports what it did as one JSON file (``--report``); the caller (a Dagster asset, a test, a
person) reads it. Jobs know nothing about Dagster.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

from confluent_kafka.schema_registry import SchemaRegistryClient
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQueryListener
from pyspark.sql.types import NumericType, StructType

from lineage_assets.jobs import PROGRESS_PREFIX, Report
from lineage_assets.source_schemas import RegistryError, registered_versions

CATCH_UP = "catch-up"
CONTINUOUS = "continuous"


def positive_int(text: str) -> int:
    if not text.isdigit() or int(text) == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return int(text)


def streaming_arguments(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--topic", required=True, help="source topic")
    parser.add_argument(
        "--value-schema",
        required=True,
        help="Avro schema (JSON) the job reads the values as: the catalog's reader schema",
    )
    parser.add_argument("--registry-url", required=True, help="schema registry (Confluent API) of the writer versions")
    parser.add_argument("--subject", required=True, help="registry subject of the source values, e.g. orders-value")
    parser.add_argument("--checkpoint", required=True, help="checkpoint folder of the query")
    parser.add_argument(
        "--mode",
        choices=[CATCH_UP, CONTINUOUS],
        default=CATCH_UP,
        help="catch-up: process what is available, commit, exit; continuous: run until stopped",
    )
    parser.add_argument("--trigger-seconds", type=float, default=5.0, help="micro-batch interval in continuous mode")
    parser.add_argument(
        "--max-records-per-batch",
        type=positive_int,
        help="most records one micro-batch reads (maxOffsetsPerTrigger); default: all available",
    )
    parser.add_argument("--report", required=True, help="where to write the JSON report")
    parser.add_argument("--progress-file", help="append one JSON line per progress report to this file")
    parser.add_argument(
        "--drain-file", help="continuous mode: when this file appears, process what is available, stop and exit 0"
    )
    return parser


class SourceVersions:
    """The registered writer versions of the source's values, judged against the reader schema, and
    the records read of each. ``refresh`` looks them up again, so a deployment reads a version
    registered after it started without a restart."""

    OBSERVATION = "schema_versions"  # the name of the per-batch counts observed on a streaming query

    def __init__(self, args: argparse.Namespace):
        self.registry_url, self.subject, self.reader_schema = args.registry_url, args.subject, args.value_schema
        # One client for every refresh: it keeps its connection and the versions it has read, so a
        # micro-batch makes one request, not a new connection's several.
        self.client = SchemaRegistryClient({"url": self.registry_url})
        self.by_id = registered_versions(self.registry_url, self.subject, self.reader_schema, self.client)
        self.batches: dict[int, Counter[int]] = {}  # batch id -> records per schema id (a replayed batch counts once)

    def refresh(self) -> RegistryError | None:
        """Look the registry up again. Asked once a batch's offsets are planned, it knows every version
        of the batch's records: a producer registers a version before it sends a record of it. When
        the registry does not answer, the known versions stay and the error is returned (a record of
        another version is then dead-lettered as an unexpected id, to be replayed)."""
        try:
            self.by_id = registered_versions(self.registry_url, self.subject, self.reader_schema, self.client)
        except RegistryError as error:
            return error
        return None

    def observed(self, decoded: DataFrame) -> DataFrame:
        """``decoded`` with its records per known version counted in each batch's progress."""
        counts = [F.count_if(F.col("schema_id") == schema_id).alias(str(schema_id)) for schema_id in self.by_id]
        return decoded.observe(self.OBSERVATION, *(counts or [F.count(F.lit(1)).alias("records")]))

    def observed_in(self, progress) -> Counter[int]:
        """Records per schema id that one progress report observed (none when the query observes nothing)."""
        metrics = (progress.observedMetrics or {}).get(self.OBSERVATION)
        return Counter(
            {
                int(name): count
                for name, count in (metrics.asDict() if metrics else {}).items()
                if name.isdigit() and count
            }
        )

    def count_observed(self, progress) -> None:
        if (progress.observedMetrics or {}).get(self.OBSERVATION) is not None:
            self.batches[progress.batchId] = self.observed_in(progress)

    @property
    def records(self) -> Counter[int]:
        return sum(self.batches.values(), Counter())

    def summary(self, records: Counter[int] | None = None) -> list[dict]:
        """Each version read (records > 0, all batches unless ``records``): version, id, records,
        readable and why not, its fields."""
        records = self.records if records is None else records
        return [
            {
                "version": v.version,
                "schema_id": v.schema_id,
                "records": records[i],
                "readable": v.readable,
                "problems": list(v.problems),
                "fields": [list(f) for f in v.fields()],
            }
            for i, v in sorted(self.by_id.items(), key=lambda item: item[1].version)
            if records[i]
        ]


def append_progress(path: str, record: dict) -> None:
    """One JSON line in the progress file that a supervisor reads."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("a") as out:
        out.write(json.dumps(record, default=str) + "\n")


class ProgressLog(StreamingQueryListener):
    """Appends each progress report (and the termination) to a JSON-lines file, for a supervisor;
    with the batch's records per writer version and the run's column metrics so far when the query
    observes them."""

    def __init__(self, path: str, versions: SourceVersions | None = None, columns: ColumnMetrics | None = None):
        self.path = path
        self.versions = versions
        self.columns = columns

    def _append(self, record: dict) -> None:
        append_progress(self.path, record)

    def onQueryStarted(self, event) -> None:
        self._append({"event": "started", "id": str(event.id), "time": event.timestamp})

    def onQueryProgress(self, event) -> None:
        progress = event.progress
        source = progress.sources[0] if progress.sources else None
        self._append(
            {
                "event": "progress",
                "time": progress.timestamp,
                "batch": progress.batchId,
                "rows": progress.numInputRows,
                "input_rows_per_second": progress.inputRowsPerSecond,
                "processed_rows_per_second": progress.processedRowsPerSecond,
                "batch_duration_ms": progress.durationMs.get("triggerExecution"),
                "phases_ms": dict(
                    progress.durationMs
                ),  # where the batch's time went: planning, the sink, the commit log
                "end_offsets": _offsets(source.endOffset) if source else None,
                "latest_offsets": _offsets(source.latestOffset) if source else None,
                **(
                    {"schema_versions": self.versions.summary(self.versions.observed_in(progress))}
                    if self.versions
                    else {}
                ),
                **({"columns": self._columns_so_far(progress)} if self.columns else {}),
            }
        )

    def _columns_so_far(self, progress) -> dict:
        """The written records' column metrics over every batch of the run up to this one."""
        self.columns.count_observed(progress)  # the counting listener may come after this one
        return self.columns.summary()

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        self._append({"event": "terminated", "exception": event.exception})


PROGRESS_EVERY_S = 5.0


class ProgressPrinter(StreamingQueryListener):
    """Prints the query's progress to stdout at a readable rate (at most one line per interval)."""

    def __init__(self, every_s: float = PROGRESS_EVERY_S):
        self.every_s = every_s
        self.last_printed = 0.0
        self.rows = 0

    def onQueryStarted(self, event) -> None:
        print(f"{PROGRESS_PREFIX}query {event.name or event.id} started", flush=True)

    def onQueryProgress(self, event) -> None:
        progress = event.progress
        self.rows += progress.numInputRows
        if time.monotonic() - self.last_printed >= self.every_s:
            self.last_printed = time.monotonic()
            print(
                f"{PROGRESS_PREFIX}batch {progress.batchId}: {self.rows} rows so far, "
                f"{progress.processedRowsPerSecond or 0:.0f} rows/s",
                flush=True,
            )

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        print(f"{PROGRESS_PREFIX}query ended after {self.rows} rows", flush=True)


def numeric_columns(schema: StructType, names: tuple[str, ...] | None = None) -> dict[str, bool]:
    """Whether each column of ``schema`` (or each of ``names``, in that order) is numeric."""
    numeric = {f.name: isinstance(f.dataType, NumericType) for f in schema.fields}
    if missing := [name for name in names or () if name not in numeric]:
        raise ValueError(f"no column {', '.join(map(repr, missing))} in {', '.join(numeric)}")
    return numeric if names is None else {name: numeric[name] for name in names}


def column_aggregates(numeric: dict[str, bool], where: Column | None = None) -> dict[str, Column]:
    """Per column: its nulls, and the min and max of a numeric one, as aggregates named (and keyed)
    ``column:nulls|min|max``; over the rows ``where`` holds (all rows without it)."""
    aggregates = {}
    for name, is_numeric in numeric.items():
        column = F.col(f"`{name}`")
        aggregates[f"{name}:nulls"] = F.count_if(column.isNull() if where is None else where & column.isNull())
        if is_numeric:
            counted = column if where is None else F.when(where, column)
            aggregates |= {f"{name}:min": F.min(counted), f"{name}:max": F.max(counted)}
    return {key: aggregate.alias(key) for key, aggregate in aggregates.items()}


class ColumnMetrics:
    """Per column of the records a streaming query writes: nulls, and min and max of numeric columns,
    observed in each batch as it is written (no second pass over the data), summed over the run."""

    OBSERVATION = "column_metrics"  # the name of the per-batch metrics observed on a streaming query

    def __init__(self):
        self.numeric: dict[str, bool] = {}  # the observed columns: is each numeric
        self.batches: dict[int, dict] = {}  # batch id -> "column:nulls|min|max" -> value (a replayed batch counts once)

    def observed(self, records: DataFrame) -> DataFrame:
        """``records`` with their per-column metrics counted in each batch's progress."""
        self.numeric = numeric_columns(records.schema)
        return records.observe(self.OBSERVATION, *column_aggregates(self.numeric).values())

    def count_observed(self, progress) -> None:
        metrics = (progress.observedMetrics or {}).get(self.OBSERVATION)
        if metrics is not None:
            self.batches[progress.batchId] = metrics.asDict()

    def summary(self) -> dict:
        """Each column's metrics over every batch of the run, as ``quality_entry`` spells them."""

        def values(key: str) -> list:
            return [batch[key] for batch in self.batches.values() if batch.get(key) is not None]

        return {
            name: column_entry(
                sum(values(f"{name}:nulls")),
                min(values(f"{name}:min"), default=None) if numeric else None,
                max(values(f"{name}:max"), default=None) if numeric else None,
            )
            for name, numeric in self.numeric.items()
        }


class ObservedMetricsCounter(StreamingQueryListener):
    """Gives each batch's observed metrics to the ``observers`` (``SourceVersions``, ``ColumnMetrics``):
    every batch, where ``recentProgress`` keeps only the last ones."""

    def __init__(self, observers):
        self.observers = observers

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryProgress(self, event) -> None:
        for observer in self.observers:
            observer.count_observed(event.progress)

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        pass


# Records a Kafka poll may return. After every poll, Spark's Kafka reader asks the broker for the
# partition's first and last offsets (two round trips) and seeks back, which also drops the consumer's
# prefetched data: at Kafka's default of 500 records a poll, 4,000 round trips per million records.
RECORDS_PER_POLL = 20_000
# How long the broker may hold a fetch for new records. After each poll the consumer already has the
# next fetch waiting at the broker; at the topic's end (the last poll of a catch-up run, every batch
# of a live deployment) Spark's offset lookup would queue behind it for Kafka's default 500 ms.
FETCH_MAX_WAIT_MS = 10


def kafka_source(spark: SparkSession, args: argparse.Namespace, headers: bool = False) -> DataFrame:
    """The source topic of the job's arguments, from its first offset, in batches of at most
    ``--max-records-per-batch`` records (a catch-up run then takes several)."""
    reader = spark.readStream.format("kafka")
    if args.max_records_per_batch:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_records_per_batch))
    return (
        reader.option("kafka.bootstrap.servers", args.bootstrap_servers)
        .option("subscribe", args.topic)
        .option("startingOffsets", "earliest")
        # A deleted or compacted range must not silently skip records in a lineage-tracked job.
        .option("failOnDataLoss", "true")
        .option("includeHeaders", str(headers).lower())
        .option("kafka.max.poll.records", str(RECORDS_PER_POLL))
        .option("kafka.fetch.max.wait.ms", str(FETCH_MAX_WAIT_MS))
        .load()
    )


def observed_lineage(args: argparse.Namespace, column_lineage: dict) -> dict:
    """A job's observed column lineage (``spark/lineage.report``), also in its progress file at once,
    so a deployment reports it from its first RUNNING event on."""
    if args.progress_file:
        append_progress(args.progress_file, {"event": "lineage", "column_lineage": column_lineage})
    return column_lineage


def run_query(
    writer,
    args: argparse.Namespace,
    spark: SparkSession,
    versions: SourceVersions | None = None,
    columns: ColumnMetrics | None = None,
):
    """Start a configured DataStreamWriter in the arguments' mode and wait for it to end.

    Continuous mode runs until the query fails, the process is stopped, or the drain file appears;
    a drain processes what is available, commits, and returns normally. ``versions`` counts the
    records per writer version that the query observes (``SourceVersions.observed``), ``columns``
    the metrics of the records it writes (``ColumnMetrics.observed``)."""
    observers = [observer for observer in (versions, columns) if observer is not None]
    spark.streams.addListener(ProgressPrinter())
    if observers:
        spark.streams.addListener(ObservedMetricsCounter(observers))
    if args.progress_file:
        spark.streams.addListener(ProgressLog(args.progress_file, versions, columns))
    if args.mode == CATCH_UP:
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination()
    else:
        query = writer.trigger(processingTime=f"{args.trigger_seconds} seconds").start()
        drain = Path(args.drain_file) if args.drain_file else None
        while not query.awaitTermination(1):
            if drain is not None and drain.exists():
                query.processAllAvailable()
                query.stop()
                break
        if query.exception() is not None:
            raise RuntimeError(f"streaming query failed: {query.exception()}")
    for progress in query.recentProgress if observers else ():
        for observer in observers:
            observer.count_observed(progress)  # the listener may not have seen the last reports yet
    return query


def progress_summary(query) -> dict:
    """Rows read and the Kafka offsets covered, from the query's progress reports."""
    progresses = query.recentProgress
    summary = {
        "batches": len(progresses),
        "rows_in": sum(p.get("numInputRows", 0) for p in (json.loads(p.json) for p in progresses)),
        "start_offsets": None,
        "end_offsets": None,
    }
    with_sources = [json.loads(p.json) for p in progresses if p.sources]
    if with_sources:
        summary["start_offsets"] = _offsets(with_sources[0]["sources"][0].get("startOffset"))
        summary["end_offsets"] = _offsets(with_sources[-1]["sources"][0].get("endOffset"))
    return summary


def _offsets(value):
    return json.loads(value) if isinstance(value, str) else value


def column_entry(nulls: int | None, low=None, high=None) -> dict:
    """One column of a ``quality`` report entry: its nulls, and its min and max as numbers when known."""
    entry = {} if nulls is None else {"nulls": int(nulls)}
    return {**entry, **({} if low is None else {"min": float(low)}), **({} if high is None else {"max": float(high)})}


def quality_entry(rows: int, size: int, files: int, columns: dict[str, dict]) -> dict:
    """A job's ``quality`` report entry: rows, bytes and files, and per column ``column_entry``."""
    return {"rows": rows, "bytes": size, "files": files, "columns": columns}


def files_totals(files: DataFrame) -> tuple[dict, list[str]]:
    """The totals of an Iceberg table's ``files`` metadata table that its ``quality`` entry is made
    of (``table_quality_entry``), and its columns: the manifests' record counts, file sizes and
    per-column statistics (``readable_metrics``), never the data."""
    metrics = files.schema["readable_metrics"].dataType
    numeric = {c.name for c in metrics.fields if isinstance(c.dataType["lower_bound"].dataType, NumericType)}
    aggregates = [
        F.count_if(F.col("content") != 0).alias("delete_files"),
        F.count(F.lit(1)).alias("files"),
        F.sum("record_count").alias("rows"),
        F.sum("file_size_in_bytes").alias("bytes"),
    ]
    for name in metrics.fieldNames():
        column = F.col("readable_metrics")[name]
        aggregates += [
            F.sum(column["null_value_count"]).alias(f"{name}:nulls"),
            F.count(column["null_value_count"]).alias(f"{name}:counted"),
        ]
        if name in numeric:
            unbounded = column["lower_bound"].isNull() & ~column["null_value_count"].eqNullSafe(F.col("record_count"))
            aggregates += [
                F.min(column["lower_bound"]).alias(f"{name}:min"),
                F.max(column["upper_bound"]).alias(f"{name}:max"),
                F.count_if(unbounded).alias(f"{name}:unbounded"),
            ]
    return files.agg(*aggregates).collect()[0].asDict(), metrics.fieldNames()


def table_quality_entry(totals: dict, columns: list[str]) -> dict | None:
    """A table's ``quality`` entry from the totals of its files (``files_totals``:
    ``column:nulls|counted|min|max|unbounded``).

    Each number is exact or left out: a column's nulls when every file counted them, its min and max
    when it is numeric (other bounds are not numbers, and strings' are truncated) and every file
    with a value in it has bounds. None when the table has delete files: rows deleted by them are
    still in the data files' counts."""
    if totals["delete_files"]:
        return None

    def column(name: str) -> dict:
        nulls = (totals[f"{name}:nulls"] or 0) if totals[f"{name}:counted"] == totals["files"] else None
        if totals.get(f"{name}:unbounded"):
            return column_entry(nulls)
        return column_entry(nulls, totals.get(f"{name}:min"), totals.get(f"{name}:max"))

    return quality_entry(
        totals["rows"] or 0, totals["bytes"] or 0, totals["files"], {name: column(name) for name in columns}
    )


def table_schema_id(spark: SparkSession, table: str) -> int | None:
    """The id of the table's current schema, from Iceberg's metadata log."""
    rows = spark.sql(
        f"SELECT latest_schema_id FROM {table}.metadata_log_entries ORDER BY timestamp DESC LIMIT 1"
    ).collect()
    return rows[0].latest_schema_id if rows else None


def table_state(spark: SparkSession, table: str) -> dict:
    """The table as committed now (``REFRESH``: a streaming query's batches commit through another
    session's catalog cache): its latest snapshot, schema id and ``quality``, from its metadata."""
    spark.sql(f"REFRESH TABLE {table}")
    latest = spark.sql(f"SELECT snapshot_id FROM {table}.snapshots ORDER BY committed_at DESC LIMIT 1").collect()
    snapshot_id = latest[0].snapshot_id if latest else None
    return {
        "snapshot_id": snapshot_id,
        "schema_id": table_schema_id(spark, table),
        "quality": table_quality(spark, table, snapshot_id),
    }


def table_quality(spark: SparkSession, table: str, snapshot_id: int | None) -> dict | None:
    """The ``quality`` entry of the Iceberg table as of ``snapshot_id`` (None: it has none, it is empty)."""
    return table_quality_entry(*table_totals(spark, table, snapshot_id))


def table_totals(spark: SparkSession, table: str, snapshot_id: int | None) -> tuple[dict, list[str]]:
    """``files_totals`` of the Iceberg table as of ``snapshot_id`` (the current one when None)."""
    as_of = "" if snapshot_id is None else f" VERSION AS OF {snapshot_id}"
    return files_totals(spark.sql(f"SELECT * FROM {table}.files{as_of}"))


def totals_after_append(totals: dict, summary: dict[str, str], appended: dict) -> dict:
    """``files_totals`` of a table after an append to the snapshot they are of: the new snapshot's
    summary (Iceberg's running totals of files, rows, bytes and delete files; the data files it
    added) and the appended records' ``column_aggregates``, observed as they were written. Their
    nulls are counted in every new file; their min and max are exact."""
    added_files = int(summary.get("added-data-files", "0"))  # absent from an empty commit's
    after = {
        **totals,
        "files": int(summary["total-data-files"]),
        "rows": int(summary["total-records"]),
        "bytes": int(summary["total-files-size"]),
        "delete_files": int(summary["total-delete-files"]),
    }
    for key, value in appended.items():
        name, metric = key.rsplit(":", 1)
        before = totals.get(key)
        if metric == "nulls":
            after[key], after[f"{name}:counted"] = (before or 0) + value, totals[f"{name}:counted"] + added_files
        elif value is not None:
            after[key] = value if before is None else (min if metric == "min" else max)(before, value)
    return after


def write_report(path: str, report: type[Report], started: float, **fields) -> None:
    """The job's report, as the class its caller reads (lineage_assets/jobs.py)."""
    report(**fields, duration_seconds=round(time.monotonic() - started, 3)).write(Path(path))


def create_table(
    spark: SparkSession, table: str, columns: str, partitioned_by: str, properties: dict[str, str] | None = None
) -> bool:
    """Create the Iceberg table (format v2, parquet, snappy, and ``properties``) and its namespace if
    missing; True when this call created it. ``columns``: the catalog's, as
    ``lineage_assets.jobs.table_columns`` lists them.

    What exists is asked of the catalog, not left to ``IF NOT EXISTS``: such a statement ends at once,
    before openlineage-spark's listener looks its execution up, which the agent logs as an ERROR."""
    if spark.catalog.tableExists(table.replace("`", "")):
        return False
    namespace = table.rsplit(".", 1)[0]
    if not spark.catalog.databaseExists(namespace.replace("`", "")):
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
    chosen = {
        "format-version": "2",
        "write.format.default": "parquet",
        "write.parquet.compression-codec": "snappy",
        **(properties or {}),
    }
    spark.sql(f"""
        CREATE TABLE IF NOT EXISTS {table} ({columns})
        USING iceberg PARTITIONED BY ({partitioned_by})
        TBLPROPERTIES ({", ".join(f"'{key}'='{value}'" for key, value in chosen.items())})""")
    return True


def _hadoop_path(spark: SparkSession, location: str):
    """A Hadoop path and its file system (local, S3A): what Spark itself reads the location with."""
    path = spark.sparkContext._jvm.org.apache.hadoop.fs.Path(location)
    return path, path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())


def planned_batches(spark: SparkSession, checkpoint: str) -> bool:
    """Whether a query's checkpoint already holds planned batches (its offset log is not empty)."""
    path, filesystem = _hadoop_path(spark, f"{checkpoint.rstrip('/')}/offsets")
    return bool(filesystem.exists(path) and filesystem.listStatus(path))


def files_under(spark: SparkSession, location: str) -> tuple[int, int]:
    """(data files, bytes) below a Hadoop path, leaving out Spark's own metadata folders."""
    path, filesystem = _hadoop_path(spark, location)
    if not filesystem.exists(path):
        return 0, 0
    files = size = 0
    listing = filesystem.listFiles(path, True)
    while listing.hasNext():
        status = listing.next()
        relative = str(status.getPath().toString())[len(location) :]
        if "_spark_metadata" in relative or relative.rsplit("/", 1)[-1].startswith((".", "_")):
            continue
        files += 1
        size += status.getLen()
    return files, size

"""Running a job's streaming query in its mode, and following it: progress printed for a person, each
progress report appended to the progress file for a supervisor, and each batch's observed metrics
given to the observers that count them."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQueryListener

from lineage_assets.job_specs import PROGRESS_PREFIX
from spark.support.arguments import CATCH_UP
from spark.support.kafka_source import SourceVersions
from spark.support.quality import ColumnMetrics
from spark.support.reports import append_progress

PROGRESS_EVERY_S = 5.0


class QueryListener(StreamingQueryListener):
    """Follows a job's streaming query. Each batch's observed metrics go to the ``versions`` and
    ``columns`` observers first (every batch, where ``recentProgress`` keeps only the last ones);
    progress is printed at most once per ``every_s``; with a ``progress_file``, each report is
    appended to it with the batch's records per writer version and the run's column metrics so far.
    ``read``: the records of each batch as the job counted them, by batch id, where Spark's
    ``numInputRows`` counts the source's rows once per execution of the batch (a batch the job reads
    twice, for its rows and its dead letters, counts them twice)."""

    def __init__(
        self,
        progress_file: str | None,
        versions: SourceVersions | None = None,
        columns: ColumnMetrics | None = None,
        written: Callable[[int], dict] | None = None,
        every_s: float = PROGRESS_EVERY_S,
        read: Mapping[int, int] | None = None,
    ):
        self.progress_file, self.versions, self.columns, self.every_s = progress_file, versions, columns, every_s
        self.written, self.read = written, {} if read is None else read
        self.last_printed = 0.0
        # batch id -> rows read and the source offsets it started and ended at (a replayed batch counts once)
        self.batches: dict[int, dict] = {}

    def record(self, progress) -> None:
        """One batch's progress: counted by the observers, its rows and offsets kept (from this
        listener, and again from the query's ``recentProgress`` once it ended, for reports it has not
        had yet)."""
        for observer in (self.versions, self.columns):
            if observer is not None:
                observer.count_observed(progress)
        source = _source(progress)
        self.batches[progress.batchId] = {
            "rows": self.read.get(progress.batchId, progress.numInputRows),
            "start": _offsets(source.get("startOffset")),
            "end": _offsets(source.get("endOffset")),
        }

    def summary(self) -> dict:
        """The run's batches, rows read, and the source offsets it started and ended at: from its first
        batch's start to its last batch's end, however many batches it took."""
        read = [self.batches[batch] for batch in sorted(self.batches) if self.batches[batch]["end"] is not None]
        return {
            "batches": len(self.batches),
            "rows_in": self.rows,
            "start_offsets": read[0]["start"] if read else None,
            "end_offsets": read[-1]["end"] if read else None,
        }

    @property
    def rows(self) -> int:
        """The records the run's batches read (a batch run again counts once)."""
        return sum(batch["rows"] for batch in self.batches.values())

    def _append(self, record: dict) -> None:
        if self.progress_file:
            append_progress(self.progress_file, record)

    def onQueryStarted(self, event) -> None:
        print(f"{PROGRESS_PREFIX}query {event.name or event.id} started", flush=True)
        self._append({"event": "started", "id": str(event.id), "time": event.timestamp})

    def onQueryProgress(self, event) -> None:
        progress = event.progress
        self.record(progress)
        if time.monotonic() - self.last_printed >= self.every_s:
            self.last_printed = time.monotonic()
            print(
                f"{PROGRESS_PREFIX}batch {progress.batchId}: {self.rows} rows so far, "
                f"{progress.processedRowsPerSecond or 0:.0f} rows/s",
                flush=True,
            )
        source = _source(progress)
        self._append(
            {
                "event": "progress",
                "time": progress.timestamp,
                "batch": progress.batchId,
                "rows": progress.numInputRows,
                "input_rows_per_second": progress.inputRowsPerSecond,
                "processed_rows_per_second": progress.processedRowsPerSecond,
                "batch_duration_ms": progress.durationMs.get("triggerExecution"),
                # where the batch's time went: planning, the sink, the commit log
                "phases_ms": dict(progress.durationMs),
                "start_offsets": _offsets(source.get("startOffset")),
                "end_offsets": _offsets(source.get("endOffset")),
                "latest_offsets": _offsets(source.get("latestOffset")),
                **(
                    {"schema_versions": self.versions.summary(self.versions.observed_in(progress))}
                    if self.versions
                    else {}
                ),
                **({"columns": self.columns.summary()} if self.columns else {}),
                **(self.written(progress.batchId) if self.written and self.progress_file else {}),
            }
        )

    def onQueryTerminated(self, event) -> None:
        print(f"{PROGRESS_PREFIX}query ended after {self.rows} rows", flush=True)
        self._append({"event": "terminated", "exception": event.exception})


def run_query(
    writer,
    args: argparse.Namespace,
    spark: SparkSession,
    versions: SourceVersions | None = None,
    columns: ColumnMetrics | None = None,
    written: Callable[[int], dict] | None = None,
    read: Mapping[int, int] | None = None,
):
    """Start a configured DataStreamWriter in the arguments' mode and wait for it to end.

    Continuous mode runs until the query fails, the process is stopped, or the drain file appears;
    a drain processes what is available, commits, and returns normally. ``versions`` counts the
    records per writer version that the query observes (``SourceVersions.observed``), ``columns``
    the metrics of the records it writes (``ColumnMetrics.observed``); ``written`` gives what a batch
    wrote (by its id), for the progress record a deployment reports from; ``read`` the records of each
    batch as the job counted them (``QueryListener``). The query, and its ``QueryListener.summary``."""
    listener = QueryListener(args.progress_file, versions, columns, written, read=read)
    spark.streams.addListener(listener)
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
    for progress in query.recentProgress:
        listener.record(progress)  # the listener may not have had the last reports yet
    return query, listener.summary()


def _source(progress) -> dict:
    """The progress report's (first) source as its JSON has it: PySpark's ``SourceProgress`` of a
    query's ``recentProgress`` spells offsets as Python text, not JSON."""
    sources = json.loads(progress.json).get("sources") or [{}]
    return sources[0]


def _offsets(value):
    """A source's offsets as progress reports them (JSON text; none before a source's first batch)."""
    return (json.loads(value) if isinstance(value, str) else value) or None

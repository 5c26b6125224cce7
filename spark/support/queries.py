"""Running a job's streaming query in its mode, and following it: progress printed for a person, each
progress report appended to the progress file for a supervisor, and each batch's observed metrics
given to the observers that count them."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQueryListener

from lineage_assets.job_specs import PROGRESS_PREFIX
from spark.support.arguments import CATCH_UP
from spark.support.kafka import SourceVersions
from spark.support.quality import ColumnMetrics
from spark.support.reports import append_progress

PROGRESS_EVERY_S = 5.0


class QueryListener(StreamingQueryListener):
    """Follows a job's streaming query. Each batch's observed metrics go to the ``versions`` and
    ``columns`` observers first (every batch, where ``recentProgress`` keeps only the last ones);
    progress is printed at most once per ``every_s``; with a ``progress_file``, each report is
    appended to it with the batch's records per writer version and the run's column metrics so far."""

    def __init__(
        self,
        progress_file: str | None,
        versions: SourceVersions | None = None,
        columns: ColumnMetrics | None = None,
        every_s: float = PROGRESS_EVERY_S,
    ):
        self.progress_file, self.versions, self.columns, self.every_s = progress_file, versions, columns, every_s
        self.last_printed = 0.0
        self.rows = 0

    def _append(self, record: dict) -> None:
        if self.progress_file:
            append_progress(self.progress_file, record)

    def onQueryStarted(self, event) -> None:
        print(f"{PROGRESS_PREFIX}query {event.name or event.id} started", flush=True)
        self._append({"event": "started", "id": str(event.id), "time": event.timestamp})

    def onQueryProgress(self, event) -> None:
        progress = event.progress
        for observer in (self.versions, self.columns):
            if observer is not None:
                observer.count_observed(progress)
        self.rows += progress.numInputRows
        if time.monotonic() - self.last_printed >= self.every_s:
            self.last_printed = time.monotonic()
            print(
                f"{PROGRESS_PREFIX}batch {progress.batchId}: {self.rows} rows so far, "
                f"{progress.processedRowsPerSecond or 0:.0f} rows/s",
                flush=True,
            )
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
                # where the batch's time went: planning, the sink, the commit log
                "phases_ms": dict(progress.durationMs),
                "end_offsets": _offsets(source.endOffset) if source else None,
                "latest_offsets": _offsets(source.latestOffset) if source else None,
                **(
                    {"schema_versions": self.versions.summary(self.versions.observed_in(progress))}
                    if self.versions
                    else {}
                ),
                **({"columns": self.columns.summary()} if self.columns else {}),
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
):
    """Start a configured DataStreamWriter in the arguments' mode and wait for it to end.

    Continuous mode runs until the query fails, the process is stopped, or the drain file appears;
    a drain processes what is available, commits, and returns normally. ``versions`` counts the
    records per writer version that the query observes (``SourceVersions.observed``), ``columns``
    the metrics of the records it writes (``ColumnMetrics.observed``)."""
    spark.streams.addListener(QueryListener(args.progress_file, versions, columns))
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
    observers = [observer for observer in (versions, columns) if observer is not None]
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

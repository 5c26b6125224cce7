"""One deployment's folder: the only module that knows its files, its processes and how its run ends.

``<state>/deployments/<job>/`` holds ``deployment.json`` (what runs: the dataset, the spark-submit
arguments, the environment, their hash); what the runner writes while it lives (``runner.json``,
``progress.jsonl``, ``runner.log``, ``spark.log``); ``drain`` (asks the job to finish what is
available); and ``ended.json``, the run's terminal event, written once under ``end.lock`` by
whoever ends the run: its runner, or, when the runner died without a word, its Spark job's guard,
the CLI or the supervision sensor.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from openlineage.client.event_v2 import RunState

from lineage_assets.datasets import DATASETS
from lineage_assets.lineage import events
from lineage_assets.lineage.emitter import emitter_for
from lineage_assets.lineage.event_log import file_lock
from lineage_assets.lineage.facets import StreamingProgressRunFacet
from lineage_assets.lineage.graph import TERMINAL
from lineage_assets.lineage.observed import ColumnLineage, Observation, observe_run
from lineage_assets.lineage.run_facts import (
    DatasetVersion,
    JobError,
    OutputStatistics,
    RunFacts,
    WrittenFile,
    offset_ranges,
    orders_read,
    snapshot_written,
)
from lineage_assets.lineage.summary import summary
from lineage_assets.processes import command_line, names, pids_naming, terminate
from lineage_assets.settings import Settings
from lineage_assets.settings_environment import settings_from_env

# A stopped Spark job commits nothing half-way (checkpoints and Iceberg commits are atomic); it gets
# this long to exit on SIGTERM before it is killed.
ORPHAN_STOP_S = 20.0
# Lines of the job's log that the FAIL of a vanished runner carries.
JOB_LOG_LINES = 40
RUNNER_GONE = (
    "the deployment's runner process is gone without reporting an end (killed, out of memory or machine restart)"
)


def _fingerprint(lineage: ColumnLineage) -> str:
    return hashlib.sha256(repr(sorted(lineage.items())).encode()).hexdigest()


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        record: dict[str, Any] = json.loads(path.read_text())  # every file read here holds one JSON object
        return record
    except (FileNotFoundError, json.JSONDecodeError):
        return None


@dataclass(frozen=True)
class DeploymentFolder:
    path: Path

    # --- its files ------------------------------------------------------------------------------
    @property
    def progress_file(self) -> Path:
        return self.path / "progress.jsonl"

    @property
    def drain_file(self) -> Path:
        return self.path / "drain"

    @property
    def reported_file(self) -> Path:
        """What the run's events have named so far: how many of the files it added, and the column
        lineage they last carried."""
        return self.path / "reported.json"

    @property
    def report_file(self) -> Path:
        return self.path / "report.json"

    @property
    def runner_log(self) -> Path:
        return self.path / "runner.log"

    @property
    def spark_log(self) -> Path:
        return self.path / "spark.log"

    @property
    def secrets_file(self) -> Path:
        """The Spark settings that are secrets, for the owner only, while the job runs."""
        return self.path / "spark-secrets.properties"

    def job_log_tail(self, lines: int) -> str:
        """The last ``lines`` lines of the Spark job's log (empty before it wrote any)."""
        try:
            with self.spark_log.open("rb") as log:
                log.seek(max(0, log.seek(0, os.SEEK_END) - 200 * lines))  # long enough for ``lines`` lines
                return "\n".join(log.read().decode(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    def spec(self) -> dict[str, Any]:
        return read_json(self.path / "deployment.json") or {}

    def write_spec(self, spec: dict[str, Any]) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        (self.path / "deployment.json").write_text(json.dumps(spec, indent=2))

    def runner(self) -> dict[str, Any]:
        return read_json(self.path / "runner.json") or {}

    def write_runner(self, record: dict[str, Any]) -> None:
        (self.path / "runner.json").write_text(json.dumps(record))

    def ended(self) -> dict[str, Any] | None:
        return read_json(self.path / "ended.json")

    def draining(self) -> bool:
        return self.drain_file.exists()

    def progress(self, event: str = "progress") -> list[dict[str, Any]]:
        """The Spark job's progress records of one kind: "progress" (one per batch), "committed" or "lineage"."""
        if not self.progress_file.exists():
            return []
        records = (json.loads(line) for line in self.progress_file.read_text().splitlines() if line.strip())
        return [record for record in records if record.get("event") == event]

    def last_progress(self) -> dict[str, Any] | None:
        progress = self.progress()
        return progress[-1] if progress else None

    def progress_facet(self) -> StreamingProgressRunFacet:
        """Rows processed so far and the latest batch's rates and offsets, as a lineage facet."""
        progress = self.progress()
        latest = progress[-1] if progress else {}
        return StreamingProgressRunFacet(
            processedRows=sum(record.get("rows", 0) for record in progress),
            inputRowsPerSecond=latest.get("input_rows_per_second"),
            processedRowsPerSecond=latest.get("processed_rows_per_second"),
            lastBatchDurationMs=latest.get("batch_duration_ms"),
            lastBatchTime=latest.get("time"),
            sourceOffsets=latest.get("end_offsets"),
        )

    def versions_read(self) -> tuple[dict[str, Any], ...]:
        """The writer versions of the records read so far, summed over the job's batches (the
        ingestion reports them with its commits, the other jobs with each progress report)."""
        read: dict[int, dict[str, Any]] = {}
        for record in self.progress("committed") + self.progress():
            for version in record.get("schema_versions") or ():
                seen = read.setdefault(version["version"], {**version, "records": 0})
                seen["records"] += version["records"]
        return tuple(read[number] for number in sorted(read))

    def output_written(self) -> tuple[DatasetVersion | None, dict[str, Any] | None]:
        """What the job last reported of its output: an Iceberg table at its latest commit (snapshot
        and schema id, and the ``quality`` of the whole table), or the column metrics of the records
        it wrote so far in this run (a ``quality`` entry without bytes and files, which a streaming
        file sink's progress does not report). (None, None) before either."""
        tables = [commit for commit in self.progress("committed") if commit.get("snapshot_id") is not None]
        if tables:
            table = tables[-1]
            written = snapshot_written(
                table["snapshot_id"],
                table["schema_id"],
                tables[0].get("parent_snapshot_id"),
                tables[0].get("parent_data_snapshot_id"),
            )
            return written, table["quality"]
        progress = self.progress()
        if progress and "columns" in progress[-1]:
            rows = sum(record.get("rows", 0) for record in progress)
            return None, {"rows": rows, "bytes": None, "files": None, "columns": progress[-1]["columns"]}
        return None, None

    def observation(self, settings: Settings) -> Observation:
        """What the job last observed of its write in its plan (``observed.observe_run``); nothing
        before it did."""
        reports = self.progress("lineage")
        return observe_run(reports[-1]["column_lineage"] if reports else None, settings)

    def facts(self, settings: Settings, progress: StreamingProgressRunFacet, repeat_lineage: bool = True) -> RunFacts:
        """What the deployment's run read and wrote so far (``progress``: its ``progress_facet``), as
        its RUNNING events and its end report it: the offsets from its first batch's start to its
        latest batch's end, its output as of its latest commit, the offsets it wrote to a topic, and
        the files it added since its last event that named files (``reported``). Its column lineage
        too, unless ``repeat_lineage`` is off and its last event carried the same: a deployment sends
        a RUNNING event every few seconds, and its lineage was most of each (Marquez keeps one
        dataset version per run and schema, which keeps the lineage an earlier event of the run sent)."""
        reported = read_json(self.reported_file) or {}
        version, quality = self.output_written()
        progress_records = self.progress()
        batches = [record for record in progress_records if record.get("end_offsets")]
        start, end = (batches[0].get("start_offsets"), batches[-1]["end_offsets"]) if batches else (None, None)
        # A job writing a topic reports its end offsets with each batch; the archive the files each batch added.
        outputs = [record for record in progress_records if record.get("output_end_offsets")]
        offsets = None
        if outputs:
            (topic,) = outputs[-1]["output_end_offsets"]
            offsets = offset_ranges(topic, outputs[0]["output_start_offsets"], outputs[-1]["output_end_offsets"])
        # Files: those added since the run's last event, as a long-running archive adds thousands a day.
        added = [record["files_added"] for record in progress_records if "files_added" in record]
        files = (
            tuple(WrittenFile(path, size) for batch in added for path, size in batch)[reported.get("files", 0) :]
            if added
            else None
        )
        observation = self.observation(settings)
        if not repeat_lineage and observation.column_lineage is not None:
            if _fingerprint(observation.column_lineage) == reported.get("lineage"):
                observation = Observation()
        return RunFacts(
            statistics=OutputStatistics(rows=progress.processedRows),
            version=version,
            quality=quality,
            reads=(orders_read(settings, self.versions_read(), (), start, end),),
            # An ingestion reports the days of each commit (the other jobs write no partitioned table).
            partitions=tuple(sorted({day for commit in self.progress("committed") for day in commit.get("days", ())}))
            or None,
            observation=observation,
            offsets=offsets,
            files=files,
        )

    def reported(self, facts: RunFacts) -> None:
        """Record that an event of the run named ``facts``' files and column lineage (sent before this
        is recorded: an ender that dies in between names them again, which readers take once)."""
        known = read_json(self.reported_file) or {}
        if facts.files:
            known["files"] = known.get("files", 0) + len(facts.files)
        if facts.column_lineage is not None:
            known["lineage"] = _fingerprint(facts.column_lineage)
        self.reported_file.write_text(json.dumps(known))

    def clear_run(self) -> None:
        """Forget the last run's files before a new run starts in this folder."""
        leftovers = (self.drain_file, self.path / "ended.json", self.path / "runner.json", self.progress_file)
        for leftover in (*leftovers, self.reported_file):
            leftover.unlink(missing_ok=True)

    # --- its processes --------------------------------------------------------------------------
    def runner_pid(self) -> int | None:
        """The runner's pid while it runs here (a reused pid names another command line)."""
        pid: int | None = self.runner().get("pid")
        return pid if pid and names(command_line(pid), self.path) else None

    def processes(self) -> list[int]:
        """Every live process of this deployment: its runner, the guard and the Spark job (the driver's
        JVM and Python), all of which name this folder in their arguments."""
        return pids_naming(self.path)

    # --- its end, exactly once ------------------------------------------------------------------
    def end(self, state: RunState, by: str, error: JobError | None = None, **record: object) -> dict[str, Any] | None:
        """Send the run's terminal event to the durable event log and record it in ``ended.json``;
        None (and nothing sent) when the run had already ended."""
        with file_lock(self.path / "end.lock"):
            return self._end(state, by, error, **record)

    def end_dead(
        self,
        runner_running: Callable[[], bool],
        by: str,
        gone: Callable[[], JobError] | None = None,
    ) -> dict[str, Any] | None:
        """When the runner is gone: stop what it left running, and end its run with FAIL (``gone``: why,
        as far as the runner's host can tell; ``runner_gone`` by default) unless it ended. What was done
        (the orphans stopped, the end recorded), or None when nothing was."""
        with file_lock(self.path / "end.lock"):
            if runner_running():
                return None
            orphans = [pid for pid in self.processes() if pid != os.getpid()]  # a guard ending its own job
            terminate(orphans, ORPHAN_STOP_S)
            ended = None
            if self.runner().get("run_id") and self.ended() is None:
                error = (gone or self.runner_gone)()
                if orphans:
                    stopped = f"; its Spark job (pids {', '.join(map(str, orphans))}) was stopped"
                    error = replace(error, message=error.message + stopped)
                ended = self._end(RunState.FAIL, by, error)
            return {"orphans": orphans, "ended": ended} if orphans or ended else None

    def runner_gone(self) -> JobError:
        """The error of a run whose runner vanished: that, and the last lines of its job's log."""
        return JobError(RUNNER_GONE, stack_trace=self.job_log_tail(JOB_LOG_LINES) or None)

    def _end(self, state: RunState, by: str, error: JobError | None, **record: object) -> dict[str, Any] | None:
        if self.ended() is not None:
            return None
        spec, run_id = self.spec(), self.runner()["run_id"]
        settings = settings_from_env({**os.environ, **spec["environment"]})
        emitter = emitter_for(settings)
        # An ender killed between sending and recording left the event in the log: send it once only.
        if not any(state in TERMINAL for _, state in summary(emitter.log).graph.run_states.get(run_id, ())):
            progress = self.progress_facet()
            facts = self.facts(settings, progress)
            emitter.emit(
                events.asset_event(
                    state,
                    DATASETS[spec["dataset"]],
                    None,
                    settings,
                    facts,
                    run_id=run_id,
                    running_interval=spec["running_interval"],
                    error=error,
                    progress=progress,
                )
            )
            self.reported(facts)
        ended = {
            "state": state.value,
            "run_id": run_id,
            "at": dt.datetime.now(dt.UTC).isoformat(),
            "by": by,
            "reason": error.message if error else None,
            **record,
        }
        temporary = self.path / "ended.json.tmp"
        temporary.write_text(json.dumps(ended))
        temporary.replace(self.path / "ended.json")  # readers never see half a record
        return ended

"""The runner of one streaming deployment: runs its Spark job in continuous mode and reports its lineage.

    python -m lineage_assets.streaming.runner <deployment folder>

START when the job is launched; RUNNING every ``running_interval`` seconds while it makes progress,
carrying the latest progress (rows, rates, batch duration, offsets) read from the job's progress
file; then exactly one terminal event: COMPLETE after a drain, ABORT when stopped (SIGTERM or
SIGINT), FAIL with the job's error when it dies. A runner killed outright (SIGKILL, OOM) cannot
report; the supervision sensor ends such runs.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from openlineage.client.event_v2 import RunState
from openlineage.client.uuid import generate_new_uuid

from lineage_assets.catalog import DATASETS
from lineage_assets.lineage import events
from lineage_assets.resources.lineage import emitter_for
from lineage_assets.settings import PROJECT_ROOT, Settings
from lineage_assets.spark_conf import spark_submit_command, spark_submit_env
from lineage_assets.streaming.deployments import last_progress


def progress_facet(folder: Path, processed_rows: int) -> events.StreamingProgressRunFacet:
    latest = last_progress(folder) or {}
    return events.StreamingProgressRunFacet(
        processedRows=processed_rows, inputRowsPerSecond=latest.get("input_rows_per_second"),
        processedRowsPerSecond=latest.get("processed_rows_per_second"),
        lastBatchDurationMs=latest.get("batch_duration_ms"), lastBatchTime=latest.get("time"),
        sourceOffsets=latest.get("end_offsets"))


def job_error(log_text: str, exit_code: int) -> events.JobError:
    """What a failed job's log says went wrong: its exception and causes as the message, the log's
    last non-INFO lines as the stack trace."""
    lines = [line for line in log_text.splitlines() if " INFO " not in line and " WARN " not in line]
    heads = [line.strip() for line in lines if not line.strip().startswith("at ")]  # no stack frames
    causes = [line for line in heads if "Error" in line.split(":")[0] or "Exception" in line.split(":")[0]
              or line.startswith(("Caused by:", ": "))]
    unique = list(dict.fromkeys(causes))[-12:]
    return events.JobError(message=f"streaming job exited with code {exit_code}: " + " | ".join(unique),
                           stack_trace="\n".join(lines[-200:]), language="PYTHON")


def processed_rows(folder: Path) -> int:
    path = folder / "progress.jsonl"
    if not path.exists():
        return 0
    return sum(json.loads(line).get("rows", 0) for line in path.read_text().splitlines() if '"progress"' in line)


def main(folder: Path) -> int:
    spec = json.loads((folder / "deployment.json").read_text())
    settings = Settings.from_env({**os.environ, **spec["environment"]})
    dataset = DATASETS[spec["dataset"]]
    emitter = emitter_for(settings)
    run_id = str(generate_new_uuid())
    interval = spec["running_interval"]

    def emit(state: RunState, **facts) -> None:
        emitter.emit(events.asset_event(state, dataset, None, settings, run_id=run_id, running_interval=interval, **facts))

    stop_requested = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stop_requested.append(signum))
    signal.signal(signal.SIGINT, lambda signum, frame: stop_requested.append(signum))

    command = spark_submit_command(settings, PROJECT_ROOT / spec["script"],
                                   [*spec["arguments"], "--report", str(folder / "report.json")],
                                   {"spark.app.name": f"{dataset.job.name}-deployment"})
    workdir = settings.state_dir / "spark"
    workdir.mkdir(parents=True, exist_ok=True)
    runner = {"pid": os.getpid(), "run_id": run_id, "started_at": dt.datetime.now(dt.UTC).isoformat()}
    (folder / "runner.json").write_text(json.dumps(runner))
    emit(RunState.START)
    spark_log = (folder / "spark.log").open("ab")
    job = subprocess.Popen(command, stdout=spark_log, stderr=subprocess.STDOUT, env=spark_submit_env(), cwd=workdir,
                           start_new_session=True)
    # The job's process group, so that a supervisor can stop it if this runner dies without a word.
    (folder / "runner.json").write_text(json.dumps({**runner, "spark_pgid": job.pid}))
    last_running = time.monotonic()
    reported_rows = 0
    while job.poll() is None:
        if stop_requested:
            os.killpg(job.pid, signal.SIGTERM)
            try:
                job.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(job.pid, signal.SIGKILL)
                job.wait()
            break
        if time.monotonic() - last_running >= interval:  # a sign of life, with or without new batches
            reported_rows = processed_rows(folder)
            emit(RunState.RUNNING, progress=progress_facet(folder, reported_rows),
                 statistics=events.OutputStatistics(rows=reported_rows))
            last_running = time.monotonic()
        time.sleep(0.5)

    rows = processed_rows(folder)
    if stop_requested:
        state, error = RunState.ABORT, events.JobError(f"deployment stopped by signal {stop_requested[0]}", language="PYTHON")
    elif job.returncode == 0:
        state, error = RunState.COMPLETE, None
    else:
        state, error = RunState.FAIL, job_error((folder / "spark.log").read_text(errors="replace"), job.returncode)
    emit(state, error=error, statistics=events.OutputStatistics(rows=max(rows, reported_rows)),
         progress=progress_facet(folder, rows))
    (folder / "ended.json").write_text(json.dumps(
        {"state": state.value, "run_id": run_id, "at": dt.datetime.now(dt.UTC).isoformat(), "exit_code": job.returncode}))
    emitter.close(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))

"""The runner of one streaming deployment: runs its Spark job in continuous mode and reports its lineage.

    python -m lineage_assets.streaming.runner <deployment folder>

START when the job is launched; RUNNING every ``running_interval`` seconds while it makes progress,
carrying the latest progress (rows, rates, batch duration, offsets) read from the job's progress
file; then exactly one terminal event: COMPLETE after a drain, ABORT when stopped (SIGTERM or
SIGINT), FAIL with the job's error when it dies. A runner killed outright (SIGKILL, OOM) cannot
report: the job's guard (``guard.py``) then stops the job and sends the FAIL.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from openlineage.client.event_v2 import RunState
from openlineage.client.uuid import generate_new_uuid

from lineage_assets.datasets import DATASETS
from lineage_assets.lineage import events
from lineage_assets.lineage.emitter import emitter_for
from lineage_assets.lineage.facets import StreamingProgressRunFacet
from lineage_assets.lineage.run_facts import NO_FACTS, JobError, RunFacts
from lineage_assets.processes import terminate
from lineage_assets.settings import PROJECT_ROOT
from lineage_assets.settings_environment import settings_from_env
from lineage_assets.spark_conf import spark_submit_command, spark_submit_env
from lineage_assets.streaming.exclusive import exclusive_run
from lineage_assets.streaming.folder import ORPHAN_STOP_S, DeploymentFolder


def job_error(log_text: str, exit_code: int) -> JobError:
    """What a failed job's log says went wrong: its exception and causes as the message, the log's
    last non-INFO lines as the stack trace."""
    lines = [line for line in log_text.splitlines() if " INFO " not in line and " WARN " not in line]
    heads = [line.strip() for line in lines if not line.strip().startswith("at ")]  # no stack frames
    causes = [
        line
        for line in heads
        if "Error" in line.split(":")[0] or "Exception" in line.split(":")[0] or line.startswith(("Caused by:", ": "))
    ]
    unique = list(dict.fromkeys(causes))[-12:]
    ended = f"was killed by {signal.Signals(-exit_code).name}" if exit_code < 0 else f"exited with code {exit_code}"
    return JobError(message=f"streaming job {ended}: " + " | ".join(unique), stack_trace="\n".join(lines[-200:]))


def main(folder: Path) -> int:
    deployment = DeploymentFolder(folder)
    spec = deployment.spec()
    settings = settings_from_env({**os.environ, **spec["environment"]})
    dataset = DATASETS[spec["dataset"]]
    emitter = emitter_for(settings)
    run_id = str(generate_new_uuid())
    interval = spec["running_interval"]

    def emit(
        state: RunState,
        facts: RunFacts = NO_FACTS,
        progress: StreamingProgressRunFacet | None = None,
    ) -> None:
        emitter.emit(
            events.asset_event(
                state, dataset, None, settings, facts, run_id=run_id, running_interval=interval, progress=progress
            )
        )

    stop_requested: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stop_requested.append(signum))
    signal.signal(signal.SIGINT, lambda signum, frame: stop_requested.append(signum))

    command = spark_submit_command(
        settings,
        PROJECT_ROOT / spec["script"],
        [*spec["arguments"], "--report", str(deployment.report_file)],
        {"spark.app.name": f"{dataset.job.name}-deployment"},
        secrets_file=deployment.secrets_file,
    )
    workdir = settings.state_dir / "spark"
    workdir.mkdir(parents=True, exist_ok=True)
    runner = {"pid": os.getpid(), "run_id": run_id, "started_at": dt.datetime.now(dt.UTC).isoformat()}
    # Held for the deployment's life, by this runner and the guard of its Spark job, which outlives it.
    with exclusive_run(
        settings.state_dir,
        dataset.job.name,
        dataset.key,
        f"its continuous deployment (run {run_id}, pid {os.getpid()}) keeps the asset up to date; "
        f"`lineage-assets stop {dataset.key}` stops it",
    ) as lock:
        deployment.write_runner(runner)
        emit(RunState.START)
        spark_log = deployment.spark_log.open("ab")
        job = subprocess.Popen(
            [sys.executable, "-m", "lineage_assets.streaming.guard", str(folder), *command],
            stdout=spark_log,
            stderr=subprocess.STDOUT,
            env=spark_submit_env(),
            cwd=workdir,
            start_new_session=True,
            pass_fds=(lock,),
        )
        deployment.write_runner({**runner, "spark_pgid": job.pid})  # the guard leads the job's group
        last_running = time.monotonic()
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
                progress = deployment.progress_facet()
                facts = deployment.facts(settings, progress, repeat_lineage=False)
                emit(RunState.RUNNING, facts, progress=progress)
                deployment.reported(facts)
                last_running = time.monotonic()
            time.sleep(0.5)
        # A driver killed alone leaves its Python process (or its JVM) behind: nothing outlives the run.
        terminate([pid for pid in deployment.processes() if pid != os.getpid()], ORPHAN_STOP_S)
        deployment.secrets_file.unlink(missing_ok=True)

        if stop_requested:
            state, error = RunState.ABORT, JobError(f"deployment stopped by signal {stop_requested[0]}")
        elif job.returncode == 0:
            state, error = RunState.COMPLETE, None
        else:
            state, error = RunState.FAIL, job_error(deployment.spark_log.read_text(errors="replace"), job.returncode)
        deployment.end(state, "its runner", error, exit_code=job.returncode)
        emitter.flush(timeout=10)  # what is left goes out with the next sender
        # The runner exits as its job did (a signal as 128 + its number, as a shell says it), so a
        # container's exit code says what `docker ps` users expect; a stopped job exits 0.
        if state != RunState.FAIL:
            return 0
        return job.returncode if job.returncode > 0 else 128 - job.returncode


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))

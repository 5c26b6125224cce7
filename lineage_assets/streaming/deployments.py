"""Long-running deployments of the streaming jobs (continuous mode), outside any Dagster run.

The local backend keeps each deployment in ``<state>/deployments/<job>/``: ``deployment.json`` (what
runs: the dataset, the spark-submit arguments, the environment, and their hash), and what the
runner process writes while it lives (``runner.json``, ``progress.jsonl``, ``runner.log``) and when
it ends (``ended.json``). One runner process per deployment (``runner.py``) runs the Spark job and
reports its lineage.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from lineage_assets.assets.archive import archive_job_arguments
from lineage_assets.assets.lakehouse import ingestion_job_arguments
from lineage_assets.assets.live_stats import live_stats_job_arguments
from lineage_assets.catalog import ARCHIVE, LAKEHOUSE_ORDERS, SUPPLIER_STATS_LIVE, Dataset
from lineage_assets.resources.kafka import KafkaResource
from lineage_assets.resources.lakehouse import LakehouseResource
from lineage_assets.resources.spark_jobs import SparkJobsResource

STREAMING_JOBS: dict[str, tuple[Dataset, Callable[[KafkaResource, SparkJobsResource], list[str]]]] = {
    d.key: (d, arguments) for d, arguments in (
        (ARCHIVE, archive_job_arguments),
        (SUPPLIER_STATS_LIVE, live_stats_job_arguments),
        (LAKEHOUSE_ORDERS, ingestion_job_arguments),
    )
}


class DeploymentError(RuntimeError):
    """A deployment could not be started or stopped; the message names it and its log."""


@dataclass(frozen=True)
class DeploymentStatus:
    name: str
    job: str
    running: bool
    pid: int | None
    run_id: str | None
    config_hash: str | None
    started_at: str | None
    last_progress: dict | None
    ended: dict | None
    log: str

    def as_dict(self) -> dict:
        return asdict(self)


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def last_progress(folder: Path) -> dict | None:
    path = folder / "progress.jsonl"
    if not path.exists():
        return None
    progress = [json.loads(line) for line in path.read_text().splitlines() if '"progress"' in line]
    return progress[-1] if progress else None


def runner_alive(folder: Path) -> int | None:
    """The runner's pid while it runs (its command line names this deployment's folder)."""
    runner = read_json(folder / "runner.json")
    if not runner:
        return None
    try:
        cmdline = Path(f"/proc/{runner['pid']}/cmdline").read_bytes().decode(errors="replace")
        state = Path(f"/proc/{runner['pid']}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None
    return runner["pid"] if str(folder) in cmdline and state != "Z" else None


class LocalDeployments:
    """Deployments as supervised local processes."""

    def __init__(self, lakehouse: LakehouseResource, running_interval: int = 10, trigger_seconds: float = 5.0):
        self.lakehouse = lakehouse
        self.running_interval = running_interval
        self.trigger_seconds = trigger_seconds

    def folder(self, name: str) -> Path:
        dataset, _ = self._job(name)
        return self.lakehouse.settings().state_dir / "deployments" / dataset.job.name

    @staticmethod
    def _job(name: str):
        if name not in STREAMING_JOBS:
            raise DeploymentError(f"no streaming job for {name!r}; deployable: {', '.join(STREAMING_JOBS)}")
        return STREAMING_JOBS[name]

    def spec(self, name: str) -> dict:
        dataset, arguments = self._job(name)
        kafka = KafkaResource(lakehouse=self.lakehouse)
        spark_jobs = SparkJobsResource(lakehouse=self.lakehouse)
        folder = self.folder(name)
        spec = {
            "dataset": dataset.key,
            "script": dataset.job.source,
            "arguments": [*arguments(kafka, spark_jobs), "--mode", "continuous", "--trigger-seconds", str(self.trigger_seconds),
                          "--progress-file", str(folder / "progress.jsonl"), "--drain-file", str(folder / "drain")],
            "environment": self.lakehouse.settings().as_environment(),
            "running_interval": self.running_interval,
        }
        spec["config_hash"] = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]
        return spec

    def status(self, name: str) -> DeploymentStatus:
        folder = self.folder(name)
        deployment = read_json(folder / "deployment.json") or {}
        runner = read_json(folder / "runner.json") or {}
        pid = runner_alive(folder)
        return DeploymentStatus(
            name=name, job=self._job(name)[0].job.name, running=pid is not None, pid=pid, run_id=runner.get("run_id"),
            config_hash=deployment.get("config_hash"), started_at=runner.get("started_at"),
            last_progress=last_progress(folder), ended=read_json(folder / "ended.json"), log=str(folder / "runner.log"))

    def deploy(self, name: str) -> str:
        """Start the deployment; "unchanged" when it already runs with this config, "restarted"
        (drained, then started again from its checkpoint) when its config changed."""
        spec = self.spec(name)
        current = self.status(name)
        if current.running and current.config_hash == spec["config_hash"]:
            return "unchanged"
        outcome = "started"
        if current.running:
            self.stop(name, drain=True)
            outcome = "restarted"
        folder = self.folder(name)
        folder.mkdir(parents=True, exist_ok=True)
        for leftover in ("drain", "ended.json", "runner.json", "progress.jsonl"):
            (folder / leftover).unlink(missing_ok=True)
        (folder / "deployment.json").write_text(json.dumps(spec, indent=2))
        with (folder / "runner.log").open("ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "lineage_assets.streaming.runner", str(folder)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 30
        while runner_alive(folder) is None:
            if process.poll() is not None:
                raise DeploymentError(f"{name}: the runner exited with code {process.returncode}; log: {folder / 'runner.log'}")
            if time.monotonic() > deadline:
                raise DeploymentError(f"{name}: the runner did not come up within 30 s; log: {folder / 'runner.log'}")
            time.sleep(0.2)
        return outcome

    def stop(self, name: str, drain: bool = False, timeout: float = 180.0) -> str:
        """Stop the deployment: ``drain`` finishes what is available and ends COMPLETE; otherwise the
        job is terminated and ends ABORT. Returns "stopped" or "not running"."""
        folder = self.folder(name)
        pid = runner_alive(folder)
        if pid is None:
            return "not running"
        if drain:
            (folder / "drain").touch()
        else:
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while runner_alive(folder) is not None:
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                raise DeploymentError(f"{name}: did not stop within {timeout:.0f} s and was killed; log: {folder / 'runner.log'}")
            time.sleep(0.5)
        return "stopped"

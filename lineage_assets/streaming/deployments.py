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

    # --- how a deployment's runner process lives: the hooks a backend provides --------------
    def _launch(self, name: str, folder: Path) -> Callable[[], int | None]:
        """Start the runner; returns a probe giving its exit code once it has exited."""
        with (folder / "runner.log").open("ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "lineage_assets.streaming.runner", str(folder)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        return process.poll

    def _running(self, folder: Path) -> int | None:
        return runner_alive(folder)

    def _signal(self, folder: Path, signum: int) -> None:
        pid = runner_alive(folder)
        if pid is not None:
            os.kill(pid, signum)

    def stop_orphan(self, folder: Path, wait_s: float = 0.0) -> bool:
        """Stop the Spark job of a runner that died without stopping it (its process group); with
        ``wait_s``, wait that long for it to exit, then kill it. True when there was one."""
        pgid = (read_json(folder / "runner.json") or {}).get("spark_pgid")

        def alive() -> bool:
            try:  # the pid may have been reused by another process
                return str(folder) in Path(f"/proc/{pgid}/cmdline").read_bytes().decode(errors="replace")
            except OSError:
                return False

        if not pgid or not alive():
            return False
        try:
            os.killpg(pgid, signal.SIGTERM)
            deadline = time.monotonic() + wait_s
            while wait_s and alive():
                if time.monotonic() > deadline:
                    os.killpg(pgid, signal.SIGKILL)
                    break
                time.sleep(0.5)
        except ProcessLookupError:
            pass
        return True

    def status(self, name: str) -> DeploymentStatus:
        folder = self.folder(name)
        deployment = read_json(folder / "deployment.json") or {}
        runner = read_json(folder / "runner.json") or {}
        pid = self._running(folder)
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
        # A dead runner's Spark job must be gone before a new one takes the same checkpoint.
        self.stop_orphan(folder, wait_s=60.0)
        for leftover in ("drain", "ended.json", "runner.json", "progress.jsonl"):
            (folder / leftover).unlink(missing_ok=True)
        (folder / "deployment.json").write_text(json.dumps(spec, indent=2))
        exit_code = self._launch(name, folder)
        deadline = time.monotonic() + 60
        while self._running(folder) is None:
            if exit_code() is not None:
                raise DeploymentError(f"{name}: the runner exited with code {exit_code()}; log: {folder / 'runner.log'}")
            if time.monotonic() > deadline:
                raise DeploymentError(f"{name}: the runner did not come up within 60 s; log: {folder / 'runner.log'}")
            time.sleep(0.2)
        return outcome

    def stop(self, name: str, drain: bool = False, timeout: float = 180.0) -> str:
        """Stop the deployment: ``drain`` finishes what is available and ends COMPLETE; otherwise the
        job is terminated and ends ABORT. Returns "stopped" or "not running"."""
        folder = self.folder(name)
        if self._running(folder) is None:
            return "not running"
        if drain:
            (folder / "drain").touch()
        else:
            self._signal(folder, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while self._running(folder) is not None:
            if time.monotonic() > deadline:
                self._signal(folder, signal.SIGKILL)
                raise DeploymentError(f"{name}: did not stop within {timeout:.0f} s and was killed; log: {folder / 'runner.log'}")
            time.sleep(0.5)
        return "stopped"


class DockerDeployments(LocalDeployments):
    """Deployments as detached containers of the project image, for users with a Docker engine.

    The container runs the same runner with the same deployment folder: the state and jar folders
    are bind-mounted at their host paths, and the container shares the host network, so every
    address in the settings means the same inside. Not Dagster Pipes: a Pipes container lives for
    one Dagster run, a deployment outlives the run that started it. The configuration is checked
    with dagster-docker's own validators; containers are managed with the Docker SDK it uses.
    """

    LABEL = "lineage-assets.deployment"

    def __init__(self, lakehouse: LakehouseResource, running_interval: int = 10, trigger_seconds: float = 5.0,
                 container_kwargs: dict | None = None, client=None):
        from dagster_docker.utils import validate_docker_config, validate_docker_image

        super().__init__(lakehouse, running_interval, trigger_seconds)
        self.image = lakehouse.settings().docker_image
        validate_docker_image(self.image)
        validate_docker_config(None, None, container_kwargs)
        self.container_kwargs = container_kwargs or {}
        self._client = client

    @property
    def client(self):
        if self._client is None:
            import docker

            self._client = docker.from_env()
        return self._client

    def container_name(self, folder: Path) -> str:
        return f"lineage-assets-{folder.name}"

    def container_spec(self, name: str) -> dict:
        """Arguments of ``containers.run`` for the deployment (pure: the unit-tested part)."""
        settings = self.lakehouse.settings()
        folder = self.folder(name)
        return {
            **self.container_kwargs,
            "image": self.image,
            "name": self.container_name(folder),
            "command": ["python", "-m", "lineage_assets.streaming.runner", str(folder)],
            "environment": settings.as_environment(),
            "volumes": {
                str(settings.state_dir): {"bind": str(settings.state_dir), "mode": "rw"},
                str(settings.cache_dir): {"bind": str(settings.cache_dir), "mode": "ro"},
            },
            "network_mode": "host",
            "labels": {self.LABEL: self._job(name)[0].job.name},
            "detach": True,
            "stop_signal": "SIGTERM",
        }

    def _container(self, folder: Path):
        import docker.errors

        try:
            return self.client.containers.get(self.container_name(folder))
        except docker.errors.NotFound:
            return None

    def _launch(self, name: str, folder: Path) -> Callable[[], int | None]:
        old = self._container(folder)
        if old is not None:
            old.remove(force=True)
        container = self.client.containers.run(**self.container_spec(name))

        def exit_code() -> int | None:
            container.reload()
            return container.attrs["State"]["ExitCode"] if container.status == "exited" else None
        return exit_code

    def _running(self, folder: Path) -> int | None:
        container = self._container(folder)
        if container is None or container.status != "running":
            return None
        return container.attrs["State"]["Pid"]

    def _signal(self, folder: Path, signum: int) -> None:
        container = self._container(folder)
        if container is not None:
            container.kill(signal=signum)

    def stop_orphan(self, folder: Path, wait_s: float = 0.0) -> bool:
        return False  # the job lives and dies with its container


def deployments_for(lakehouse: LakehouseResource, **options) -> LocalDeployments:
    """The deployment backend the settings choose (``LINEAGE_ASSETS_DEPLOYMENT_BACKEND``)."""
    backend = lakehouse.settings().deployment_backend
    backends = {"local": LocalDeployments, "docker": DockerDeployments}
    if backend not in backends:
        raise DeploymentError(f"LINEAGE_ASSETS_DEPLOYMENT_BACKEND={backend!r}: choose local or docker")
    return backends[backend](lakehouse, **options)

"""Long-running deployments of the streaming jobs (continuous mode), outside any Dagster run.

Each deployment has a folder (``folder.py`` knows its files and processes) and one runner process
(``runner.py``) that runs its Spark job under a guard (``guard.py``) and reports its lineage. A
deployment whose runner died without ending its run is *dead*; whichever comes first of its
guard, ``status``, ``deploy``, ``stop``, ``stack up`` and the supervision sensor ends it
(``end_if_dead``): its orphaned processes stopped, its run ended with FAIL, once.
"""

from __future__ import annotations

import abc
import datetime as dt
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
from typing import TYPE_CHECKING, Any

from lineage_assets.datasets import ARCHIVE, LAKEHOUSE_ORDERS, SUPPLIER_STATS_LIVE
from lineage_assets.job_specs import STREAMING_JOBS, JobSpec
from lineage_assets.lineage.run_facts import JobError
from lineage_assets.settings import Settings
from lineage_assets.settings_environment import as_environment, secret_environment
from lineage_assets.streaming.exclusive import running
from lineage_assets.streaming.folder import JOB_LOG_LINES, DeploymentFolder

if TYPE_CHECKING:
    from docker import DockerClient
    from docker.models.containers import Container

# Seconds between a deployment's micro-batches, by job. The ingestion and the archive write a snapshot or
# files with each batch, so every 5 s (an order reaches the table about 4 s after it is produced). The
# live windows write only the windows that closed, and Spark closes a window in the batch after the one
# whose orders moved the watermark past it: a batch every second keeps them live.
TRIGGER_SECONDS = {ARCHIVE.key: 5.0, LAKEHOUSE_ORDERS.key: 5.0, SUPPLIER_STATS_LIVE.key: 1.0}


class DeploymentError(RuntimeError):
    """A deployment could not be started or stopped; the message names it and its log."""


# What a terminal event in ``ended.json`` means for the deployment.
ENDED_STATES = {"ABORT": "stopped", "COMPLETE": "completed", "FAIL": "failed"}


@dataclass(frozen=True)
class DeploymentStatus:
    name: str
    job: str
    state: str  # not deployed, running, draining, stopped, completed, failed, or dead (runner gone, run not ended)
    running: bool
    pid: int | None
    run_id: str | None
    config_hash: str | None
    started_at: str | None
    last_progress: dict[str, Any] | None
    ended: dict[str, Any] | None  # the terminal event: state, at, by, reason
    orphan_pids: list[int]  # a dead deployment's processes still alive (its Spark job)
    log: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def describe_ending(done: dict[str, Any]) -> str:
    """What ``end_if_dead`` did, in words."""
    said = []
    if done["orphans"]:
        said.append(f"stopped its orphaned processes (pids {', '.join(map(str, done['orphans']))})")
    if done["ended"]:
        said.append(f"ended run {done['ended']['run_id']} with FAIL")
    return "was dead: " + " and ".join(said)


class Deployments(abc.ABC):
    """The streaming deployments: what they run, their status, deploy and stop. Where a runner lives
    (a local process, a container) is a backend's hooks: ``_launch``, ``_running``, ``_signal``, and
    what it can tell of a runner that is gone (``_gone``) and where its output is (``_log``)."""

    def __init__(self, settings: Settings, running_interval: int = 10, trigger_seconds: float | None = None):
        """``trigger_seconds``: every job's, instead of its own (``TRIGGER_SECONDS``)."""
        self.settings = settings
        self.running_interval = running_interval
        self.trigger_seconds = trigger_seconds

    def trigger(self, name: str) -> float:
        """Seconds between the micro-batches of ``name``'s deployment."""
        return (
            self.trigger_seconds if self.trigger_seconds is not None else TRIGGER_SECONDS[self._job(name).dataset.key]
        )

    def folder(self, name: str) -> Path:
        return self.settings.state_dir / "deployments" / self._job(name).dataset.job.name

    def files(self, name: str) -> DeploymentFolder:
        return DeploymentFolder(self.folder(name))

    def _job(self, name: str) -> JobSpec[Any]:
        if name not in STREAMING_JOBS:
            raise DeploymentError(f"no streaming job for {name!r}; deployable: {', '.join(STREAMING_JOBS)}")
        return STREAMING_JOBS[name](self.settings)

    def spec(self, name: str) -> dict[str, Any]:
        job = self._job(name)
        files = self.files(name)
        spec: dict[str, Any] = {
            "dataset": job.dataset.key,
            "script": job.script,
            "arguments": [
                *job.arguments,
                "--mode",
                "continuous",
                "--trigger-seconds",
                str(self.trigger(name)),
                "--progress-file",
                str(files.progress_file),
                "--drain-file",
                str(files.drain_file),
            ],
            "environment": as_environment(self.settings, secrets=False),  # the runner's own environment has them
            "running_interval": self.running_interval,
        }
        spec["config_hash"] = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]
        return spec

    # --- how a deployment's runner lives: the hooks a backend provides ------------------------
    @abc.abstractmethod
    def _launch(self, name: str, folder: Path) -> Callable[[], int | None]:
        """Start the runner; returns a probe giving its exit code once it has exited."""

    @abc.abstractmethod
    def _running(self, folder: Path) -> int | None:
        """The runner's pid while it runs."""

    @abc.abstractmethod
    def _signal(self, folder: Path, signum: int) -> None:
        """Send the runner ``signum`` if it runs."""

    def _gone(self, folder: Path) -> JobError:
        """Why a runner that ended without reporting is gone, as the error its run ends with: what its
        host can tell, and the last lines of its job's log."""
        return DeploymentFolder(folder).runner_gone()

    def _log(self, folder: Path) -> str:
        """Where the runner's output is."""
        return str(DeploymentFolder(folder).runner_log)

    def status(self, name: str) -> DeploymentStatus:
        folder = self.folder(name)
        files = self.files(name)
        runner = files.runner()
        pid = self._running(folder)
        ended = files.ended()
        orphans = [] if pid else files.processes()
        if pid:
            state = "draining" if files.draining() else "running"
        elif orphans or (runner.get("run_id") and ended is None):
            state = "dead"
        else:
            state = ENDED_STATES[ended["state"]] if ended else "not deployed"
        return DeploymentStatus(
            name=name,
            job=self._job(name).dataset.job.name,
            state=state,
            running=pid is not None,
            pid=pid,
            run_id=runner.get("run_id"),
            config_hash=files.spec().get("config_hash"),
            started_at=runner.get("started_at"),
            last_progress=files.last_progress(),
            ended=ended,
            orphan_pids=orphans,
            log=self._log(folder),
        )

    def end_if_dead(self, name: str, by: str) -> dict[str, Any] | None:
        """End a dead deployment: stop its orphaned processes, and end its run with FAIL unless it
        ended. What was done (see ``describe_ending``), or None when the deployment was not dead."""
        folder = self.folder(name)
        if not folder.exists():
            return None
        return self.files(name).end_dead(lambda: self._running(folder) is not None, by, lambda: self._gone(folder))

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
        elif (holder := running(self.settings.state_dir, self._job(name).dataset.job.name)) is not None:
            raise DeploymentError(f"{name} runs already: {holder}; deploy it once that run has ended")
        folder, files = self.folder(name), self.files(name)
        # A dead run ends (FAIL, as its own spec says) and its Spark job is gone before a new one takes
        # the same checkpoint.
        self.end_if_dead(name, by="deploy")
        files.clear_run()
        files.write_spec(spec)
        exit_code = self._launch(name, folder)
        deadline = time.monotonic() + 60
        # Deployed once its runner has started the run (a container runs before its runner does).
        while self._running(folder) is None or not files.runner().get("run_id"):
            if exit_code() is not None:
                raise DeploymentError(f"{name}: the runner exited with code {exit_code()}; log: {self._log(folder)}")
            if time.monotonic() > deadline:
                raise DeploymentError(f"{name}: the runner did not come up within 60 s; log: {self._log(folder)}")
            time.sleep(0.2)
        return outcome

    def stop(self, name: str, drain: bool = False, timeout: float = 180.0) -> str:
        """Stop the deployment: ``drain`` finishes what is available and ends COMPLETE; otherwise the
        job is terminated and ends ABORT. A dead deployment's orphans are stopped and its run ends
        with FAIL (it had died). Returns "stopped", "not running" or what was done to a dead one."""
        folder, files = self.folder(name), self.files(name)
        if self._running(folder) is None:
            done = self.end_if_dead(name, by="stop")
            return describe_ending(done) if done else "not running"
        if drain:
            files.drain_file.touch()
        else:
            self._signal(folder, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while self._running(folder) is not None:
            if time.monotonic() > deadline:
                self._signal(folder, signal.SIGKILL)
                raise DeploymentError(
                    f"{name}: did not stop within {timeout:.0f} s and was killed; log: {self._log(folder)}"
                )
            time.sleep(0.5)
        return "stopped"


class LocalDeployments(Deployments):
    """Deployments as supervised local processes."""

    def _launch(self, name: str, folder: Path) -> Callable[[], int | None]:
        with DeploymentFolder(folder).runner_log.open("ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "lineage_assets.streaming.runner", str(folder)],
                env={**os.environ, **secret_environment(self.settings)},
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        return process.poll

    def _running(self, folder: Path) -> int | None:
        return DeploymentFolder(folder).runner_pid()

    def _signal(self, folder: Path, signum: int) -> None:
        pid = self._running(folder)
        if pid is not None:
            os.kill(pid, signum)


class DockerDeployments(Deployments):
    """Deployments as detached containers of the project image, for users with a Docker engine.

    The container runs the same runner with the same deployment folder (``container_options``: the
    state and jar folders at their host paths, the host network). Not Dagster Pipes: a Pipes
    container lives for one Dagster run, a deployment outlives the run that started it. The
    configuration is checked with dagster-docker's own validators; containers are managed with the
    Docker SDK it uses.
    """

    LABEL = "lineage-assets.deployment"

    def __init__(
        self,
        settings: Settings,
        running_interval: int = 10,
        trigger_seconds: float | None = None,
        container_kwargs: dict[str, Any] | None = None,
        client: DockerClient | None = None,
    ) -> None:
        from dagster_docker.utils import validate_docker_config, validate_docker_image

        super().__init__(settings, running_interval, trigger_seconds)
        self.image = settings.docker_image
        validate_docker_image(self.image)  # type: ignore[no-untyped-call]  # dagster-docker is unannotated
        validate_docker_config(None, None, container_kwargs)  # type: ignore[no-untyped-call]  # as above
        self.container_kwargs = container_kwargs or {}
        self._client = client

    @property
    def client(self) -> DockerClient:
        if self._client is None:
            from lineage_assets.stack.services.engine import engine_client

            self._client = engine_client(self.settings)
        return self._client

    def container_name(self, folder: Path) -> str:
        return f"lineage-assets-{folder.name}"

    def container_spec(self, name: str) -> dict[str, Any]:
        """Arguments of ``containers.run`` for the deployment (the unit-tested part; it only writes the
        containers' secrets file)."""
        from lineage_assets.stack.services.engine import container_environment, container_options

        settings = self.settings
        folder = self.folder(name)
        return {
            **self.container_kwargs,
            "image": self.image,
            "name": self.container_name(folder),
            "command": ["python", "-m", "lineage_assets.streaming.runner", str(folder)],
            "environment": container_environment(settings),
            **container_options(settings),
            "labels": {self.LABEL: self._job(name).dataset.job.name},
            "detach": True,
            "stop_signal": "SIGTERM",
        }

    def _container(self, folder: Path) -> Container | None:
        import docker.errors

        try:
            return self.client.containers.get(self.container_name(folder))
        except docker.errors.NotFound:
            return None

    def _launch(self, name: str, folder: Path) -> Callable[[], int | None]:
        old = self._container(folder)
        if old is not None:
            old.remove(force=True)
        container: Container = self.client.containers.run(**self.container_spec(name))  # detach=True: a Container

        def exit_code() -> int | None:
            container.reload()
            return int(container.attrs["State"]["ExitCode"]) if container.status == "exited" else None

        return exit_code

    def _running(self, folder: Path) -> int | None:
        container = self._container(folder)
        if container is None or container.status != "running":
            return None
        return int(container.attrs["State"]["Pid"])

    def _signal(self, folder: Path, signum: int) -> None:
        container = self._container(folder)
        if container is not None:
            container.kill(signal=signum)

    def _gone(self, folder: Path) -> JobError:
        """The container's exit code (a signal's name when it was killed by one), whether the kernel
        killed it for memory, and the last lines of its output and of its job's log."""
        container = self._container(folder)
        if container is None:
            return super()._gone(folder)
        state = container.attrs["State"]
        code = state["ExitCode"]
        how = f"exited with code {code}"
        if code > 128 and code - 128 in signal.valid_signals():
            how += f" (killed by {signal.Signals(code - 128).name})"
        if state.get("OOMKilled"):
            how += ", out of memory"
        if state.get("Error"):
            how += f": {state['Error']}"
        output = container.logs(tail=JOB_LOG_LINES).decode(errors="replace").strip()
        job_log = DeploymentFolder(folder).job_log_tail(JOB_LOG_LINES)
        lines = [line for line in f"{output}\n{job_log}".splitlines() if line.strip()]
        return JobError(
            f"the deployment's container {container.name} {how} without its runner reporting an end; "
            f"its last line of output: {lines[-1] if lines else '(none)'}",
            stack_trace="\n".join(lines) or None,
        )

    def _log(self, folder: Path) -> str:
        return f"docker logs {self.container_name(folder)}"


def deployments_in_progress(settings: Settings) -> dict[str, dt.datetime]:
    """The lineage run of each deployment whose runner runs now, with when it started: under way, not
    left RUNNING (the lineage check's evidence, as Dagster's run status is for a materialization)."""
    deployments = deployments_for(settings)
    under_way = {}
    for name in STREAMING_JOBS:
        status = deployments.status(name)
        if status.running and status.run_id and status.started_at:
            under_way[status.run_id] = dt.datetime.fromisoformat(status.started_at)
    return under_way


def deployments_for(settings: Settings, **options: Any) -> Deployments:
    """The deployment backend the settings choose (``LINEAGE_ASSETS_DEPLOYMENT_BACKEND``)."""
    backend = settings.deployment_backend
    backends: dict[str, type[Deployments]] = {"local": LocalDeployments, "docker": DockerDeployments}
    if backend not in backends:
        raise DeploymentError(f"LINEAGE_ASSETS_DEPLOYMENT_BACKEND={backend!r}: choose local or docker")
    return backends[backend](settings, **options)

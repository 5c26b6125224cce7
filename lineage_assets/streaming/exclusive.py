"""One run at a time of each streaming job.

A catch-up run and a deployment of one job read and commit the same checkpoint; two at once break it
(Spark's CONCURRENT_STREAM_LOG_UPDATE) and leave the tables behind the topic. Whoever runs the job
holds its lock file under the state folder and writes there who it is: the catch-up asset's step
for the run, a deployment's runner and its Spark job's guard (sharing one lock) for the deployment's
life, and ``lineage-assets demo`` for its whole pass (the catch-up runs it makes run under its claim).
The lock is the kernel's (``flock``): it goes with the processes holding it, so a run that died
holds nothing. It guards the runs of one state folder; machines sharing a checkpoint need one
scheduler.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path


class AlreadyRunning(RuntimeError):
    """The job runs already; the message names that run."""

    @classmethod
    def of(cls, dataset_key: str, holder: str) -> AlreadyRunning:
        return cls(
            f"{dataset_key} runs already: {holder}; a second run of the job would commit the same checkpoint. "
            "Wait for it to end, or stop it"
        )


def lock_path(state_dir: Path, job_name: str) -> Path:
    return state_dir / "runs" / f"{job_name}.lock"


@contextmanager
def exclusive_run(state_dir: Path, job_name: str, dataset_key: str, holder: str) -> Iterator[int]:
    """Hold ``job_name``'s lock, described by ``holder``, for the block; its file descriptor (a
    child given it, ``pass_fds``, holds the lock too). AlreadyRunning when another run holds it."""
    path = lock_path(state_dir, job_name)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise AlreadyRunning.of(dataset_key, _holder(path)) from None
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, holder.encode(), 0)
        yield descriptor
        os.ftruncate(descriptor, 0)
    finally:
        os.close(descriptor)


def catch_up_holder(run_id: str) -> str:
    """How a catch-up Dagster run names itself as a lock's holder."""
    return f"catch-up Dagster run {run_id} (pid {os.getpid()})"


def demo_holder() -> str:
    """How a pass of ``lineage-assets demo`` over the pipeline, in this process, names itself as the
    holder of every streaming job's lock."""
    return f"lineage-assets demo (pid {os.getpid()})"


@contextmanager
def exclusive_runs(state_dir: Path, jobs: Mapping[str, str], holder: str) -> Iterator[None]:
    """Hold the locks of all of ``jobs`` (job name -> dataset key) for the block, or none of them:
    AlreadyRunning naming the first another run holds, before anything runs. Taken in name order, so
    two runs claiming at once cannot each end up with a part. Jobs the demo in this process holds
    already are its own runs' to run: the block runs under the demo's claim."""
    if jobs and all(running(state_dir, job_name) == demo_holder() for job_name in jobs):
        yield
        return
    with ExitStack() as held:
        for job_name in sorted(jobs):
            held.enter_context(exclusive_run(state_dir, job_name, jobs[job_name], holder))
        yield


@contextmanager
def exclusive_step(state_dir: Path, job_name: str, dataset_key: str, run_id: str) -> Iterator[None]:
    """The lock of one catch-up step: already held when its run claimed the job at its start (in this
    process or, with Dagster's multiprocess executor, in the run's) or the demo that made the run holds
    it (in this process), else taken for the step."""
    holder = running(state_dir, job_name) or ""
    if holder.startswith(f"catch-up Dagster run {run_id} ") or holder == demo_holder():
        yield
        return
    with exclusive_run(state_dir, job_name, dataset_key, catch_up_holder(run_id)):
        yield


def running(state_dir: Path, job_name: str) -> str | None:
    """Who runs ``job_name`` now, or None."""
    path = lock_path(state_dir, job_name)
    if not path.exists():
        return None
    with path.open("r") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _holder(path)
        fcntl.flock(handle, fcntl.LOCK_UN)
    return None


def _holder(path: Path) -> str:
    """Who holds the lock at ``path``, as it wrote; a holder that has only just taken the lock gets a
    moment to write its name, so that a run refused at the same instant names it."""
    deadline = time.monotonic() + 1.0
    while not (holder := path.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.01)
    return holder or "another process (starting)"

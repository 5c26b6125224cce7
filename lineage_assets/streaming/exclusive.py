"""One run at a time of each streaming job.

A catch-up run and a deployment of one job read and commit the same checkpoint; two at once break it
(Spark's CONCURRENT_STREAM_LOG_UPDATE) and leave the tables behind the topic. Whoever runs the job
holds its lock file under the state folder and writes there who it is: the catch-up asset's step
for the run, a deployment's runner and its Spark job's guard (sharing one lock) for the deployment's
life. The lock is the kernel's (``flock``): it goes with the processes holding it, so a run that died
holds nothing. It guards the runs of one state folder; machines sharing a checkpoint need one
scheduler.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class AlreadyRunning(RuntimeError):
    """The job runs already; the message names that run."""


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
            raise AlreadyRunning(
                f"{dataset_key} runs already: {_holder(path)}; a second run of the job would "
                "commit the same checkpoint. Wait for it to end, or stop it"
            ) from None
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, holder.encode(), 0)
        yield descriptor
        os.ftruncate(descriptor, 0)
    finally:
        os.close(descriptor)


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
    return path.read_text().strip() or "another process (starting)"

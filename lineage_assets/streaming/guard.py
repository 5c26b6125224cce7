"""The guard of a deployment's Spark job, so that the job never outlives its runner.

    python -m lineage_assets.streaming.guard <deployment folder> <spark-submit command…>

The runner starts the guard, and the guard starts the Spark job (in the guard's process group) and
waits. When the runner is gone without ending its run (kill -9, out of memory), the guard notices
within half a second, stops the job and ends the run with FAIL, exactly once. Otherwise it is
transparent: a signal it gets goes on to the job, and it exits as the job did (same code, or killed
by the same signal), so the runner reports the job's own end.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

POLL_S = 0.5


def main(folder: Path, command: list[str]) -> int:
    runner = os.getppid()
    job = subprocess.Popen(command)  # the guard's output (spark.log), directory, environment and process group
    forwarded: list[int] = []

    def forward(signum: int, frame: FrameType | None) -> None:
        forwarded.append(signum)
        job.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    while job.poll() is None:
        # Reparented: the runner is gone. A signal forwarded already means someone is stopping the
        # job (the runner before it died, or a command ending a dead deployment): let them end it.
        if os.getppid() != runner and not forwarded:
            _end_dead(folder)
            return 1
        time.sleep(POLL_S)
    if job.returncode < 0:
        if -job.returncode in (signal.SIGTERM, signal.SIGINT):  # the two caught above (SIGKILL cannot be)
            signal.signal(-job.returncode, signal.SIG_DFL)
        os.kill(os.getpid(), -job.returncode)
    return job.returncode


def _end_dead(folder: Path) -> None:
    """Stop the deployment's job and end its run with FAIL, unless its runner runs after all."""
    # Imported only now: until then the guard waits without Dagster's and lineage's modules.
    from lineage_assets.streaming.folder import DeploymentFolder

    deployment = DeploymentFolder(folder)
    deployment.end_dead(lambda: deployment.runner_pid() is not None, by="the Spark job's guard")


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2:]))

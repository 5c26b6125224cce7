"""Processes as /proc shows them: a process is known by its pid and its whole command line."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from lineage_assets.processes import command_line


def test_a_command_with_an_empty_argument_is_known_by_its_whole_command_line():
    # A service started with an empty argument (an option given as nothing, `-k ""`) must still be
    # recognized as running by the supervisor, and stopped by `stack down`, never left behind.
    command = [sys.executable, "-c", "import sys; sys.stdin.read()", "", "last"]
    with subprocess.Popen(command, stdin=subprocess.PIPE) as process:
        try:
            # Popen returns once the child is forked; its command line is there once it has exec'd.
            deadline = time.monotonic() + 10
            while command_line(process.pid) in ([], None) and time.monotonic() < deadline:
                time.sleep(0.01)
            assert command_line(process.pid) == command
        finally:
            process.communicate(b"")
    assert command_line(process.pid) is None


SIGTERM_AFTER_A_RUN = """
import signal, subprocess, sys
import dagster as dg
from lineage_assets.demo_runs import run_in_process

signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a shell leaves it in what it starts in the background


@dg.asset
def one() -> int:
    return 1


def a_child_ignores_sigterm() -> bool:
    with subprocess.Popen(["sleep", "60"]) as child:  # Popen returns once the child has exec'd
        status = open(f"/proc/{child.pid}/status").read()
        child.kill()
    ignored = int(next(line for line in status.splitlines() if line.startswith("SigIgn:")).split()[1], 16)
    return bool(ignored & 1 << (signal.SIGTERM - 1))


run_in_process([one], dg.DagsterInstance.ephemeral(), [one.key])
print("project's run:", a_child_ignores_sigterm())
dg.materialize([one])
print("bare dg.materialize:", a_child_ignores_sigterm())
"""


def test_a_process_started_after_a_dagster_run_in_a_background_job_stops_on_sigterm(tmp_path):
    # A JVM that starts with SIGTERM ignored never stops on it: the stack's services, a Spark driver.
    # The bare run shows why the project's runs keep SIGTERM: Dagster gives it SIGINT's ignored handler.
    result = subprocess.run(
        [sys.executable, "-c", SIGTERM_AFTER_A_RUN],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "DAGSTER_HOME": str(tmp_path)},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["project's run: False", "bare dg.materialize: True"]

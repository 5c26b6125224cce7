"""Processes as /proc shows them: a process is known by its pid and its whole command line."""

from __future__ import annotations

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

"""Local processes as /proc shows them: the one liveness check of the stack and the deployments.

A recorded pid means nothing on its own (it may have been reused), so a process is identified by
its pid *and* its command line.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path


def _stat(pid: int) -> list[str]:
    """The fields of ``/proc/PID/stat`` after the command's name: its state letter first, then its
    parent's pid, …; OSError or IndexError when the process is gone."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def state(pid: int) -> str | None:
    """The process's state letter (R running, S sleeping, T stopped by a signal, t stopped by a tracer,
    Z zombie, …); None when it is gone."""
    try:
        return _stat(pid)[0]
    except (OSError, IndexError):
        return None


def command_line(pid: int) -> list[str] | None:
    """The arguments of a live process; None when it is gone or a zombie (exited, not yet reaped)."""
    try:
        letter = _stat(pid)[0]
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, IndexError):
        return None
    # An empty argument is an argument: a command given one is still known by its whole command line.
    arguments = raw.removesuffix(b"\0").split(b"\0") if raw else []  # a kernel thread has none
    return None if letter in ("Z", "X") else [part.decode(errors="replace") for part in arguments]


def names(arguments: list[str] | None, path: Path) -> bool:
    """True when one of the arguments is ``path`` or a file below it."""
    return any(argument == str(path) or argument.startswith(f"{path}/") for argument in arguments or ())


def pids_naming(path: Path) -> list[int]:
    """Live processes with ``path`` (or a file below it) among their arguments."""
    return sorted(
        int(entry.name)
        for entry in Path("/proc").iterdir()
        if entry.name.isdigit() and names(command_line(int(entry.name)), path)
    )


def alive(pid: int) -> bool:
    try:  # a child of this process that exited stays a zombie until reaped: reap it
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass
    return command_line(pid) is not None


def terminate(pids: Iterable[int], timeout: float, first_signal: int | Mapping[int, int] = signal.SIGTERM) -> None:
    """Signal the processes (one signal for all, or one per pid), wait up to ``timeout`` seconds
    for them to exit together, then kill what is left."""
    pids = list(pids)
    for pid in pids:
        try:
            os.kill(pid, first_signal[pid] if isinstance(first_signal, Mapping) else first_signal)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in pids:
        if alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    while any(alive(pid) for pid in pids):  # a killed process is gone within moments
        time.sleep(0.05)


@contextmanager
def sigterm_kept() -> Iterator[None]:
    """SIGTERM's disposition as it was before the block, again after it: around a Dagster run in this
    process (``dg.materialize``), which leaves SIGTERM with SIGINT's handler. A shell ignores SIGINT in
    what it starts in the background, so such a process would ignore SIGTERM from then on, and so would
    every process it starts (a JVM then never stops on SIGTERM)."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread sets handlers
        yield
        return
    kept = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        if kept is not None:  # None: a handler set outside Python, which Python cannot set back
            signal.signal(signal.SIGTERM, kept)


def descendants(roots: Iterable[int]) -> set[int]:
    """``roots`` and every live process below them."""
    parents = {}
    for proc in Path("/proc").iterdir():
        try:
            parents[int(proc.name)] = int(_stat(int(proc.name))[1])
        except (ValueError, OSError, IndexError):
            continue
    found, grew = set(roots), True
    while grew:
        below = {pid for pid, parent in parents.items() if parent in found} - found
        found |= below
        grew = bool(below)
    return found


def open_files_readable(pid: int) -> bool:
    """Whether this process may read ``pid``'s open files: not those of another user's process
    without the right to trace it (root in a container without CAP_SYS_PTRACE may list them, but
    not read where they lead)."""
    try:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            fd.readlink()
            return True
    except PermissionError:
        return False
    except OSError:  # gone, or the descriptor closed meanwhile
        pass
    return True


def listeners(pids: Iterable[int]) -> dict[tuple[str, int], int]:
    """Every listening TCP socket of ``pids`` (those whose open files this process may read): (address,
    port) -> pid."""
    inodes = {}
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = fd.readlink().as_posix() if fd.is_symlink() else ""
                if target.startswith("socket:["):
                    inodes[target[8:-1]] = pid
        except OSError:
            continue
    found = {}
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:  # no IPv6 on this machine
            continue
        for line in lines:
            fields = line.split()
            if fields[3] != "0A" or fields[9] not in inodes:  # 0A: LISTEN
                continue
            address, port = fields[1].split(":")
            raw = bytes.fromhex(address)
            # /proc prints each 32-bit word in host (little-endian) order.
            raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            found[(socket.inet_ntop(family, raw), int(port, 16))] = inodes[fields[9]]
    return found

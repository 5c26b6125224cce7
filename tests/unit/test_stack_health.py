"""A service the stack started is healthy only while its own process listens on its ports: a probe
answered by another process on one of them does not count. One that does not answer is reported with
what its process does (runs, stopped) and only what it logged since this start began."""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

from lineage_assets.processes import state
from lineage_assets.settings import Settings
from lineage_assets.settings_environment import settings_from_env
from lineage_assets.stack.probes import http_ok
from lineage_assets.stack.services.base import Service, StackError
from lineage_assets.stack.supervisor import Supervisor
from tests.conftest import another_process_serving, wait_for

# The service: it binds its port only once told to (the file ``go`` in its folder), as a slow server would.
SLOW_SERVER = """
import http.server, sys, time
from pathlib import Path
go, port = Path(sys.argv[1]), int(sys.argv[2])
while not go.exists():
    time.sleep(0.05)
http.server.HTTPServer(("127.0.0.1", port), http.server.SimpleHTTPRequestHandler).serve_forever()
"""


@pytest.fixture
def settings(tmp_path) -> Settings:
    """Settings with the test's own state folder (its supervisor's records and logs), not the test stack's."""
    return dataclasses.replace(settings_from_env(), state_dir=tmp_path / "state")


def free_port() -> int:
    """A free port below the ephemeral range, which the stack refuses for a server."""
    for port in range(21000, 22000):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 21000-21999")


def slow_server(folder: Path, port: int) -> Service:
    return Service(
        name="web",
        ports=lambda settings: [port],
        address=lambda settings: f"http://127.0.0.1:{port}",
        command=lambda settings: [sys.executable, "-c", SLOW_SERVER, str(folder / "go"), str(port)],
        healthy=lambda settings: http_ok(f"http://127.0.0.1:{port}/"),
        prepare=lambda settings: (settings.state_dir / "web").mkdir(parents=True, exist_ok=True),
        start_timeout=4.0,
    )


# The service: it logs a numbered line every 50 ms and never binds its port, as a hung server would.
HUNG_SERVER = """
import itertools, time
for n in itertools.count():
    print(f"tick {n}", flush=True)
    time.sleep(0.05)
"""


def hung_server(port: int) -> Service:
    return Service(
        name="web",
        ports=lambda settings: [port],
        address=lambda settings: f"http://127.0.0.1:{port}",
        command=lambda settings: [sys.executable, "-c", HUNG_SERVER],
        healthy=lambda settings: http_ok(f"http://127.0.0.1:{port}/"),
        prepare=lambda settings: (settings.state_dir / "web").mkdir(parents=True, exist_ok=True),
        start_timeout=1.0,
    )


def test_a_service_that_runs_and_does_not_answer_is_named_with_only_what_it_logged_since_this_start(tmp_path, settings):
    port = free_port()
    service = hung_server(port)
    log = service.log_file(settings)
    log.parent.mkdir(parents=True)
    log.write_text("".join(f"an earlier run's access log line {n}\n" for n in range(40)))
    supervisor = Supervisor(settings, [service])
    try:
        with pytest.raises(StackError) as started:
            supervisor.up()
        (status,) = supervisor.status()
        first, *logged = str(started.value).splitlines()
        assert first == (
            f"web: its process (pid {status.pid}) runs but does not answer at http://127.0.0.1:{port} after 1s; "
            f"log: {log}"
        )
        assert logged and not [line for line in logged if "earlier run" in line]
        # Found running by the next `stack up`: only the lines logged after it began.
        before = max(int(n) for n in re.findall(r"^tick (\d+)$", log.read_text(), re.MULTILINE))
        with pytest.raises(StackError) as again:
            supervisor.up()
        first, *logged = str(again.value).splitlines()
        assert first.startswith(f"web: its process (pid {status.pid}) runs but does not answer")
        assert logged and all(int(line.removeprefix("tick ")) > before for line in logged)
    finally:
        supervisor.down()


def test_a_stopped_service_is_named_at_once_not_after_its_start_timeout(tmp_path, settings):
    port = free_port()
    (tmp_path / "go").touch()
    service = dataclasses.replace(slow_server(tmp_path, port), start_timeout=120.0)
    supervisor = Supervisor(settings, [service])
    try:
        (status,) = supervisor.up()
        assert status.pid is not None
        os.kill(status.pid, signal.SIGSTOP)
        wait_for(lambda: state(status.pid) == "T", 10, "the process to stop", poll=0.05)
        started = time.monotonic()
        with pytest.raises(StackError, match=rf"^web: its process \(pid {status.pid}\) is stopped \(by SIGSTOP"):
            supervisor.up()
        assert time.monotonic() - started < 10
        os.kill(status.pid, signal.SIGCONT)
        assert supervisor.up()[0].healthy
    finally:
        supervisor.down()


def test_a_port_another_process_answers_on_while_the_service_starts_is_not_its_health(tmp_path, settings):
    port = free_port()
    supervisor = Supervisor(settings, [slow_server(tmp_path, port)])
    outcome: dict = {}

    def up() -> None:
        try:
            outcome["statuses"] = supervisor.up()
        except StackError as error:
            outcome["error"] = error

    starting = threading.Thread(target=up)
    starting.start()
    record = settings.state_dir / "run" / "web.json"
    wait_for(record.exists, 10, "the service's process to start", poll=0.05)
    try:
        with another_process_serving(port, tmp_path):
            starting.join()
            assert "statuses" not in outcome  # not reported healthy on the other process's answer
            (status,) = supervisor.status()
            assert str(outcome["error"]).startswith(
                f"web: its process (pid {status.pid}) runs but does not answer at http://127.0.0.1:{port} after 4s"
            )
            assert status.running and not status.healthy
    finally:
        supervisor.down()


def test_the_service_is_healthy_once_its_own_process_answers(tmp_path, settings):
    port = free_port()
    (tmp_path / "go").touch()
    supervisor = Supervisor(settings, [slow_server(tmp_path, port)])
    try:
        (status,) = supervisor.up()
        assert status.running and status.healthy
    finally:
        supervisor.down()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()

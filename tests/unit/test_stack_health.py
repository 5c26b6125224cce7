"""A service the stack started is healthy only while its own process listens on its ports: a probe
answered by another process on one of them does not count."""

from __future__ import annotations

import dataclasses
import socket
import sys
import threading
from pathlib import Path

import pytest

from lineage_assets.settings import Settings
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


def test_a_port_another_process_answers_on_while_the_service_starts_is_not_its_health(tmp_path):
    settings = dataclasses.replace(Settings.from_env(), state_dir=tmp_path / "state")
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
            assert str(outcome["error"]).startswith(f"web: not healthy after 4s at http://127.0.0.1:{port}")
            (status,) = supervisor.status()
            assert status.running and not status.healthy
    finally:
        supervisor.down()


def test_the_service_is_healthy_once_its_own_process_answers(tmp_path):
    settings = dataclasses.replace(Settings.from_env(), state_dir=tmp_path / "state")
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

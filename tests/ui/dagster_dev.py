"""`dagster dev` on the project's workspace for a test, and what the tests do through it: launch the
backfill `lineage reached --rematerialize` asks for, and wait for it."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from lineage_assets.instance import dagster_environment, prepare_dagster_home
from lineage_assets.settings import PROJECT_ROOT, Settings
from tests.conftest import wait_for

RUN_TIMEOUT_S = 900
DAGSTER = str(PROJECT_ROOT / ".venv" / "bin" / "dagster")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def dagster_dev(settings: Settings, home: Path) -> Iterator[str]:
    """`dagster dev` (webserver and daemon) configured for ``settings``, its instance in ``home`` (its
    ``dagster.yaml`` written as `make dev` writes it); its URL."""
    prepare_dagster_home(settings, home)
    port = free_port()
    log_path = settings.state_dir / "logs" / f"dagster-dev-{home.name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [DAGSTER, "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
            cwd=PROJECT_ROOT,
            env=dagster_environment(settings, home),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 240
            while True:
                assert process.poll() is None, f"dagster dev exited with {process.returncode}; see {log_path}"
                try:
                    with urllib.request.urlopen(f"{url}/server_info", timeout=5):
                        break
                except OSError:
                    assert time.monotonic() < deadline, (
                        f"dagster dev did not answer on {url} within 240 s; see {log_path}"
                    )
                    time.sleep(2)
            yield url
        finally:
            os.killpg(process.pid, signal.SIGINT)  # dagster dev stops its webserver, daemon and code servers on SIGINT
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def stop_sensor(settings: Settings, home: Path, sensor: str) -> None:
    """Stop one of the workspace's sensors on the instance in ``home``, before `dagster dev` starts."""
    subprocess.run(
        [DAGSTER, "sensor", "stop", sensor, "-w", "workspace.yaml"],
        cwd=PROJECT_ROOT,
        env=dagster_environment(settings, prepare_dagster_home(settings, home)),
        check=True,
        capture_output=True,
        timeout=120,
    )


def backfill_status(url: str, backfill: str) -> str:
    from gql import Client, GraphQLRequest
    from gql.transport.requests import RequestsHTTPTransport

    query = "query($id: String!) { partitionBackfillOrError(backfillId: $id) { ... on PartitionBackfill { status } } }"
    client = Client(transport=RequestsHTTPTransport(url=f"{url}/graphql", timeout=30))
    return client.execute(GraphQLRequest(query, variable_values={"id": backfill}))["partitionBackfillOrError"]["status"]


def rematerialize_reached(url: str, settings: Settings, run_id: str) -> tuple[str, str]:
    """`lineage-assets lineage reached RUN_ID --rematerialize` against the `dagster dev` on ``url``,
    waited for: the backfill it launched and its line ("backfill ID: KEY DAYS (LINK)"). One backfill."""
    launched = subprocess.run(
        [str(PROJECT_ROOT / ".venv" / "bin" / "lineage-assets"), "lineage", "reached", run_id, "--rematerialize"],
        env={**os.environ, **settings.as_environment(), "LINEAGE_ASSETS_DAGSTER_PORT": url.rsplit(":", 1)[1]},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert launched.returncode == 0, launched.stderr
    (line,) = [line for line in launched.stdout.splitlines() if line.startswith("backfill ")]
    backfill = line.split()[1].rstrip(":")
    status = wait_for(
        lambda: (s := backfill_status(url, backfill)) not in ("REQUESTED", "IN_PROGRESS") and s,
        timeout=RUN_TIMEOUT_S,
        what=f"backfill {backfill}",
        poll=5,
    )
    assert status == "COMPLETED_SUCCESS", (backfill, status)
    return backfill, line

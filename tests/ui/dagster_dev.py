"""`dagster dev` on the project's workspace for a test, and what the tests do through it or through
any Dagster webserver: launch a run or the backfill `lineage reached --rematerialize` asks for, wait
for it, and compare the lineage of two pipelines of their own."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator
from pathlib import Path

import dagster as dg
from dagster_graphql import DagsterGraphQLClient

from lineage_assets.generator import GeneratorConfig
from lineage_assets.instance import dagster_environment, prepare_dagster_home
from lineage_assets.lineage.graph import LineageGraph
from lineage_assets.settings import PROJECT_ROOT, Settings
from lineage_assets.settings_environment import as_environment
from tests.conftest import wait_for

RUN_TIMEOUT_S = 900
# A day of orders, none late or bad, that tests run through two pipelines of their own to compare.
DAY = "2026-11-24"
ORDERS = GeneratorConfig(
    count=60, seed=2411, start=dt.datetime(2026, 11, 24, 10, tzinfo=dt.UTC), late_fraction=0, bad_fraction=0
)
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
        env={**os.environ, **as_environment(settings), "LINEAGE_ASSETS_DAGSTER_PORT": url.rsplit(":", 1)[1]},
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


# The settings a pipeline of its own changes: its names in the lineage, replaced to compare two pipelines.
OWN_NAMES = ("lineage_namespace", "iceberg_namespace", "orders_topic", "supplier_stats_topic", "archive_prefix")


def launch(url: str, home, job: str, **options) -> dg.DagsterRun:
    """A run of ``job`` launched as the UI launches it, once it has finished."""
    address = urllib.parse.urlparse(url)
    run_id = DagsterGraphQLClient(address.hostname, port_number=address.port).submit_job_execution(job, **options)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        return wait_for(
            lambda: (run := instance.get_run_by_id(run_id)) is not None and run.is_finished and run,
            RUN_TIMEOUT_S,
            f"run {run_id} of {job}",
            poll=3,
        )


def comparable(graph: LineageGraph, settings: Settings) -> dict:
    """What a lineage graph says, with the pipeline's own names replaced by what they stand for."""
    names = sorted(((getattr(settings, field), field) for field in OWN_NAMES), key=lambda pair: -len(pair[0]))

    def name(text) -> str:
        text = str(text)
        for value, field in names:
            text = text.replace(value, f"<{field}>")
        return text

    return {
        "jobs": {name(key): (name(job.parent), job.latest_state) for key, job in graph.jobs.items()},
        "inputs": {name(job): sorted(map(name, datasets)) for job, datasets in graph.inputs.items() if datasets},
        "outputs": {name(job): sorted(map(name, datasets)) for job, datasets in graph.outputs.items() if datasets},
        "columns": sorted(
            (name(edge), sorted(hop.kinds)) for edges in graph.column_lineage.values() for edge, hop in edges.items()
        ),
    }


def events_of_runs(events: Iterable[dict], dagster_run_ids: set[str]) -> list[dict]:
    """The events of the Dagster runs ``dagster_run_ids`` and of every run nested below them."""
    events = list(events)

    def dagster_run(event: dict) -> str | None:
        tags = event["run"]["facets"].get("tags", {}).get("tags", [])
        return next((tag["value"] for tag in tags if tag["key"] == "dagster.run_id"), None)

    def parent(event: dict) -> str | None:
        return (event["run"]["facets"].get("parent") or {}).get("run", {}).get("runId")

    runs = {e["run"]["runId"] for e in events if dagster_run(e) in dagster_run_ids}
    while nested := {e["run"]["runId"] for e in events if parent(e) in runs} - runs:
        runs |= nested
    return [e for e in events if e["run"]["runId"] in runs]

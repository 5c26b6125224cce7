"""Emission never blocks or fails the caller, and never loses or reorders an event.

The backend is openlineage-python's own FileTransport: "down" is its folder missing (every emit
raises), "back" is the folder created. Delivery runs in a sender process, as in a job.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import http.server
import json
import logging
import socket
import threading
import time
import uuid
from collections.abc import Iterator

import dagster as dg
import pytest
from dagster._core.errors import DagsterExecutionInterruptedError
from openlineage.client.event_v2 import RunState

from lineage_assets.datasets import DATASETS, SUPPLIER_STATS
from lineage_assets.lineage import sender
from lineage_assets.lineage.check import check
from lineage_assets.lineage.delivery import Backend, Delivery
from lineage_assets.lineage.emitter import LineageEmitter
from lineage_assets.lineage.events import asset_event
from lineage_assets.lineage.transport import REDACTED
from lineage_assets.resources.lineage import LineageResource, emitter_for
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.settings import Settings
from lineage_assets.streaming.runner import job_error


def event(n: int) -> dict:
    return {
        "eventType": "START",
        "eventTime": dt.datetime(2026, 11, 21, tzinfo=dt.UTC).isoformat(),
        "run": {"runId": f"0190c3a4-0000-7000-8000-{n:012d}"},
        "job": {"namespace": "t", "name": "j"},
        "producer": "urn:test",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    }


def backend(folder) -> Backend:
    return Backend({"transport": {"type": "file", "log_file_path": str(folder / "received.jsonl"), "append": True}})


def received(folder) -> list[int]:
    path = folder / "received.jsonl"
    return (
        [int(json.loads(line)["run"]["runId"][-12:]) for line in path.read_text().splitlines()] if path.exists() else []
    )


def wait_for_sender(emitter: LineageEmitter) -> None:
    deadline = time.monotonic() + 60
    while not emitter.sender_running():
        assert time.monotonic() < deadline, "the sender process did not start"
        time.sleep(0.1)


def test_events_wait_while_the_backend_is_down_and_arrive_in_order_once_it_is_back(tmp_path):
    down = tmp_path / "backend"  # missing: the transport cannot write
    emitter = LineageEmitter(tmp_path / "lineage", backend(down))
    for n in range(50):
        emitter.emit(event(n))  # returns at once, whatever the backend does
    wait_for_sender(emitter)  # delivery is another process's work, once it has started
    assert emitter.flush(timeout=0.5) is False
    assert emitter.pending() == 50 and emitter.emit_failures == 0

    down.mkdir()
    assert emitter.flush(timeout=30)
    assert received(down) == list(range(50))
    assert emitter.pending() == 0
    emitter.stop_sender()


def test_a_later_process_delivers_what_an_earlier_one_left(tmp_path):
    down = tmp_path / "backend"
    first = LineageEmitter(tmp_path / "lineage", backend(down))
    for n in range(5):
        first.emit(event(n))
    first.flush(timeout=0.2)  # the job ends with the backend down...
    first.stop_sender()  # ...and its sender is gone too (a machine restart)
    down.mkdir()
    later = LineageEmitter(tmp_path / "lineage", backend(down))
    later.emit(event(5))
    assert later.flush(timeout=30)
    assert received(down) == [0, 1, 2, 3, 4, 5]
    later.stop_sender()

    again = LineageEmitter(tmp_path / "lineage", backend(down))
    assert again.flush(timeout=5) and received(down) == [0, 1, 2, 3, 4, 5]  # nothing sent twice


def test_what_a_gone_process_left_is_sent_by_the_next_send_pending_and_nothing_starts_a_sender_for_nothing(tmp_path):
    down = tmp_path / "backend"
    container = LineageEmitter(tmp_path / "lineage", backend(down))  # a run in a container...
    for n in range(3):
        container.emit(event(n))
    wait_for_sender(container)
    container.stop_sender()  # ...gone with its sender before the backend was back
    down.mkdir()
    sensor = LineageEmitter(tmp_path / "lineage", backend(down))  # the host's sensor, emitting nothing itself
    assert sensor.pending() == 3 and not sensor.sender_running()
    sensor.send_pending()
    deadline = time.monotonic() + 60
    while sensor.pending():  # the sender's acknowledgement follows its delivery
        assert time.monotonic() < deadline, f"the sender started for what waited delivered {received(down)}"
        time.sleep(0.2)
    assert received(down) == [0, 1, 2]
    sensor.stop_sender()

    idle = LineageEmitter(tmp_path / "idle", backend(down))
    idle.emit(event(3))
    assert idle.flush(timeout=30)
    idle.stop_sender()
    (tmp_path / "idle" / "sender.log").unlink()  # a sender started would open it again
    idle.send_pending()  # all delivered: nothing to start a sender for
    assert not (tmp_path / "idle" / "sender.log").exists() and not idle.sender_running()


def test_a_sender_stays_while_events_wait_and_leaves_once_all_is_delivered_and_the_log_is_still(tmp_path):
    recorder = LineageEmitter(tmp_path / "lineage")  # records only
    for n in range(3):
        recorder.emit(event(n))
    down = tmp_path / "backend"
    Delivery(tmp_path / "lineage").name_backend(backend(down))
    started = time.monotonic()
    assert sender.main(tmp_path / "lineage", linger_s=0.3, give_up_s=2.0) == 0  # down: it tried for give_up_s
    assert time.monotonic() - started >= 2.0
    assert received(down) == [] and recorder.pending() == 3
    down.mkdir()
    assert sender.main(tmp_path / "lineage", linger_s=0.3) == 0  # no give_up_s: it leaves once all is delivered
    assert received(down) == [0, 1, 2] and recorder.pending() == 0


def test_a_torn_tail_is_set_aside_before_the_next_append_and_nothing_waits_behind_it(tmp_path):
    backend_folder = tmp_path / "backend"
    backend_folder.mkdir()
    emitter = LineageEmitter(tmp_path / "lineage", backend(backend_folder))
    emitter.emit(event(0))
    with emitter.log.path.open("a") as log:  # what a crash mid-append leaves
        log.write(json.dumps(event(1))[:40])
    assert emitter.pending() == 1 and len(emitter.events()) == 1  # a tail without its newline is no line yet
    for n in range(2, 5):
        emitter.emit(event(n))
    assert emitter.flush(timeout=30)
    assert received(backend_folder) == [0, 2, 3, 4]
    (torn,) = emitter.log.dead_letters()
    assert torn["reason"].startswith("torn") and torn["line"] == json.dumps(event(1))[:40]
    assert [e["run"]["runId"][-1] for e in emitter.events()] == ["0", "2", "3", "4"]  # the log itself is whole again
    emitter.stop_sender()


def test_a_line_that_is_no_event_is_dead_lettered_named_and_delivery_goes_on(tmp_path):
    backend_folder = tmp_path / "backend"
    backend_folder.mkdir()
    emitter = LineageEmitter(tmp_path / "lineage", backend(backend_folder))
    emitter.emit(event(0))
    emitter.emit("{not json")
    emitter.emit({"eventType": "START", "eventTime": "2026-11-21T00:00:00Z", "run": {"runId": "r"}})  # no job
    emitter.emit(event(3))
    assert emitter.flush(timeout=30)
    assert received(backend_folder) == [0, 3]
    assert [record["reason"].split(":")[0] for record in emitter.log.dead_letters()] == ["unreadable", "unreadable"]
    events, unreadable = emitter.log.read()
    assert len(events) == 2 and [line.number for line in unreadable] == [2, 3]
    assert str(unreadable[1]) == f"{emitter.log.path} line 3: not an OpenLineage event (no job)"
    emitter.stop_sender()


def test_the_sender_follows_the_backend_the_settings_name_now(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    before = LineageEmitter(tmp_path / "lineage", backend(first))
    before.emit(event(0))
    wait_for_sender(before)  # it lingers after delivering, with the first backend
    assert before.flush(timeout=30)
    after = LineageEmitter(tmp_path / "lineage", backend(second))  # a later run, other settings
    for n in range(1, 4):
        after.emit(event(n))
    assert after.flush(timeout=30)
    assert received(first) == [0] and received(second) == [1, 2, 3]
    before.stop_sender()
    after.stop_sender()


def test_emit_never_raises_even_when_it_cannot_record(tmp_path):
    emitter = LineageEmitter(tmp_path / "lineage", None)
    emitter.log.path.mkdir(parents=True)  # the segment appends go to is unusable
    emitter.emit(event(1))
    assert emitter.emit_failures == 1


@pytest.fixture()
def lineage(tmp_path):
    settings = Settings(state_dir=tmp_path)
    return LineageResource(environment=SettingsResource.of(settings)), settings


@pytest.mark.parametrize(
    "raised, terminal",
    [(DagsterExecutionInterruptedError("run cancelled"), "ABORT"), (RuntimeError("spark failed"), "FAIL")],
)
def test_an_interrupted_or_failed_materialization_ends_its_run(lineage, raised, terminal):
    resource, settings = lineage

    @dg.asset(key=["lakehouse", "supplier_stats"])
    def failing(context, lineage: LineageResource):
        with lineage.asset_run(context, SUPPLIER_STATS):
            raise raised

    with dg.instance_for_test() as instance:
        result = dg.materialize([failing], resources={"lineage": resource}, instance=instance, raise_on_error=False)
    assert not result.success
    recorded = emitter_for(settings).events()
    dagster_run, *events, dagster_run_end = recorded
    assert (dagster_run["job"]["name"], dagster_run["eventType"]) == ("dagster", "START")
    assert {"key": "dagster.job", "value": "__ephemeral_asset_job__", "source": "DAGSTER"} in dagster_run["run"][
        "facets"
    ]["tags"]["tags"]
    assert [e["eventType"] for e in events] == ["START", terminal]
    assert str(raised) in events[-1]["run"]["facets"]["errorMessage"]["message"]
    assert events[0]["run"]["runId"] == events[1]["run"]["runId"]
    assert events[0]["run"]["facets"]["parent"]["run"]["runId"] == dagster_run["run"]["runId"]
    # An in-process run has no run-status sensor: its own lineage run ends with its last step.
    assert (dagster_run_end["run"]["runId"], dagster_run_end["eventType"]) == (dagster_run["run"]["runId"], "FAIL")


def test_an_in_process_run_ends_its_lineage_run(lineage):
    resource, settings = lineage

    @dg.asset(key=["lakehouse", "supplier_stats"])
    def succeeding(context, lineage: LineageResource):
        with lineage.asset_run(context, SUPPLIER_STATS):
            pass

    with dg.instance_for_test() as instance:
        assert dg.materialize([succeeding], resources={"lineage": resource}, instance=instance).success
    recorded = emitter_for(settings).events()
    assert [e["eventType"] for e in recorded] == ["START", "START", "COMPLETE", "COMPLETE"]
    assert not [gap for gap in check(recorded, settings) if gap.startswith("run left RUNNING")]


@pytest.mark.parametrize(
    "ended_by, terminal",
    [(None, "COMPLETE"), (DagsterExecutionInterruptedError(), "ABORT"), (RuntimeError("the Spark job failed"), "FAIL")],
)
def test_the_spark_application_run_ends_as_the_asset_run_did(tmp_path, ended_by, terminal):
    """openlineage-spark reports a stopped driver's shutdown COMPLETE; the log must not."""
    from lineage_assets.lineage.run_facts import DagsterRun
    from lineage_assets.resources.lineage import AssetRunLineage

    emitter = LineageEmitter(tmp_path / "lineage", None)
    run = AssetRunLineage(
        emitter,
        SUPPLIER_STATS,
        DagsterRun("r1", "supplier_stats_job", dt.datetime.now(dt.UTC)),
        Settings(state_dir=tmp_path),
    )
    application = run.spark_application()
    agent = application.events_file  # as the agent's file transport writes its application run
    agent.parent.mkdir(parents=True)
    agent.write_text(
        "".join(
            json.dumps(
                {
                    "eventType": kind,
                    "eventTime": "2026-11-23T18:00:00Z",
                    "producer": "spark",
                    "run": {"runId": "01a2-app", "facets": {}},
                    "job": {"namespace": "n", "name": SUPPLIER_STATS.job.spark_application},
                }
            )
            + "\n"
            for kind in ("START", "COMPLETE")
        )
    )
    assert run.forward_spark_events(application, ended_by=ended_by).forwarded == 2 and not agent.exists()
    start, end = emitter.events()
    assert (start["eventType"], end["eventType"]) == ("START", terminal)
    if ended_by is not None:
        assert end["run"]["facets"]["errorMessage"]["message"].startswith(
            f"the asset run ended {terminal} while the Spark application ran: {type(ended_by).__name__}"
        )


def test_the_agents_actions_are_evidence_of_column_lineage_never_jobs_of_their_own(tmp_path):
    """An action's event (a job of its own under the application) is not forwarded; its column lineage
    of the asset's dataset is kept, in the catalog's terms."""
    from lineage_assets.lineage.observed import from_facet
    from lineage_assets.lineage.run_facts import DagsterRun
    from lineage_assets.resources.lineage import AssetRunLineage

    settings = Settings(state_dir=tmp_path)
    emitter = LineageEmitter(tmp_path / "lineage", None)
    run = AssetRunLineage(
        emitter, SUPPLIER_STATS, DagsterRun("r1", "supplier_stats_job", dt.datetime.now(dt.UTC)), settings
    )
    application = run.spark_application()
    stats, orders = SUPPLIER_STATS.identity(settings), DATASETS["lakehouse/orders"].identity(settings)

    def field(name: str, kind: str, subtype: str) -> dict:
        return {
            "namespace": orders.namespace,
            "name": orders.name,
            "field": name,
            "transformations": [{"type": kind, "subtype": subtype, "description": "", "masking": False}],
        }

    facet = {
        "fields": {"total_price": {"inputFields": [field("price", "DIRECT", "AGGREGATION")]}},
        "dataset": [field("bid_time", "INDIRECT", "GROUP_BY")],
    }
    action = {
        "eventType": "COMPLETE",
        "eventTime": "2026-11-23T18:00:00Z",
        "producer": "spark",
        "run": {"runId": "01a2-action"},
        "job": {"namespace": "n", "name": f"{SUPPLIER_STATS.job.spark_application}.overwrite_by_expression"},
        "inputs": [{"namespace": orders.namespace, "name": orders.name}],
        "outputs": [
            {
                "namespace": stats.namespace,
                "name": stats.name,
                "facets": {
                    "columnLineage": facet,
                    "schema": {"fields": [{"name": "total_price"}, {"name": "total_count"}]},
                },
            }
        ],
    }
    application.events_file.parent.mkdir(parents=True)
    application.events_file.write_text(json.dumps(action) + "\n")
    evidence = run.forward_spark_events(application)
    assert evidence.forwarded == 0 and emitter.events() == []
    lineage = from_facet(evidence.column_lineage, SUPPLIER_STATS, settings, evidence.columns)
    kinds = {
        column: {(s.dataset, s.column, s.transformation.subtype) for s in sources}
        for column, sources in lineage.items()
    }
    # The dataset-wide group-by reaches total_count too, which has no direct input.
    assert kinds == {
        "total_price": {("lakehouse/orders", "price", "AGGREGATION"), ("lakehouse/orders", "bid_time", "GROUP_BY")},
        "total_count": {("lakehouse/orders", "bid_time", "GROUP_BY")},
    }
    # Never the catalog's words for what ran: the agent's own, or where it gives none, whose they are.
    price = next(s for s in lineage["total_price"] if s.column == "price")
    assert price.transformation.description == "in openlineage-spark's plan"


def test_any_openlineage_client_can_name_the_durable_transport(tmp_path):
    from openlineage.client import OpenLineageClient
    from openlineage.client.event_v2 import Job, Run, RunEvent, RunState

    from lineage_assets.lineage.transport import DurableTransport

    backend_folder = tmp_path / "backend"
    backend_folder.mkdir()
    client = OpenLineageClient(
        config={
            "transport": {  # as an openlineage.yml names it, by class path
                "type": "lineage_assets.lineage.transport.DurableTransport",
                "folder": str(tmp_path / "lineage"),
                "backend": {"type": "file", "log_file_path": str(backend_folder / "received.jsonl"), "append": True},
            }
        }
    )
    assert isinstance(client.transport, DurableTransport)
    client.emit(
        RunEvent(
            eventType=RunState.START,
            eventTime="2026-11-21T00:00:00+00:00",
            producer="urn:test",
            run=Run(runId="0190c3a4-0000-7000-8000-000000000007"),
            job=Job(namespace="t", name="j"),
        )
    )
    assert client.transport.flush(timeout=30)
    assert received(backend_folder) == [7]
    client.transport.stop_sender()
    with pytest.raises(RuntimeError, match="the durable transport needs `backend`"):
        OpenLineageClient(config={"transport": {"type": "durable", "folder": str(tmp_path / "other")}})


def test_while_the_backend_hangs_the_status_says_a_send_waits_and_dates_the_older_error(tmp_path, capsys):
    from lineage_assets.lineage_delivery_verbs import _delivery_status

    backend_folder = tmp_path / "backend"
    backend_folder.mkdir()
    earlier = LineageEmitter(tmp_path / "lineage", backend(backend_folder))
    earlier.emit("{not json")  # set aside: the last error, for now
    assert earlier.flush(timeout=30)
    earlier.stop_sender()
    time.sleep(1.1)  # the status's times are to the second
    with socket.socket() as hanging:  # takes connections (the kernel's backlog) and never answers
        hanging.bind(("127.0.0.1", 0))
        hanging.listen()
        url = f"http://127.0.0.1:{hanging.getsockname()[1]}"
        emitter = LineageEmitter(
            tmp_path / "lineage", Backend({"transport": {"type": "http", "url": url, "timeout": 60}})
        )
        emitter.emit(event(1))
        try:
            deadline = time.monotonic() + 30
            while "sending_since" not in emitter.delivery.status():
                assert time.monotonic() < deadline, "the sender did not start sending"
                time.sleep(0.1)
            assert _delivery_status(Settings(state_dir=tmp_path / "state"), emitter) == 1
            shown = capsys.readouterr().out
            since = emitter.delivery.status()["sending_since"]
            assert f"sender        running: sending since {since}" in shown
            assert "1 events wait for delivery" in shown
            (error,) = [line for line in shown.splitlines() if line.startswith("last error")]
            assert "unreadable" in error and error.endswith("(before the sending under way)")
        finally:
            emitter.stop_sender()


def test_after_the_backend_is_back_the_status_dates_the_last_error_before_the_last_delivery(
    tmp_path, capsys, monkeypatch
):
    from lineage_assets.lineage_delivery_verbs import _delivery_status

    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    settings = Settings(state_dir=tmp_path / "state")
    down = tmp_path / "backend"
    emitter = LineageEmitter(tmp_path / "lineage", backend(down))
    emitter.emit(event(1))
    try:
        assert not emitter.flush(timeout=1)
        assert _delivery_status(settings, emitter) == 1
        (error,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("last error")]
        assert "backend unavailable" in error and not error.endswith(")")  # the backend is down now
        time.sleep(1.1)  # the status's times are to the second
        down.mkdir()
        assert emitter.flush(timeout=30)
    finally:
        emitter.stop_sender()
    assert _delivery_status(settings, emitter) == 0
    shown = capsys.readouterr().out
    delivered_at = emitter.delivery.status()["delivered_at"]
    (error,) = [line for line in shown.splitlines() if line.startswith("last error")]
    assert "backend unavailable" in error and error.endswith(f"(before the last delivery at {delivered_at})")


class TakesEvents(http.server.BaseHTTPRequestHandler):
    """A lineage backend that takes every event it is sent."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(201)
        self.end_headers()

    def log_message(self, format: str, *args) -> None:  # the test's output stays its own
        pass


@contextlib.contextmanager
def lineage_backend(answers: bool) -> Iterator[str]:
    """The URL of a backend that takes every event, or of a local port nothing listens on."""
    if not answers:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        yield f"http://127.0.0.1:{port}"
        return
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), TakesEvents)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("answers", [False, True])
def test_a_run_that_ends_with_its_lineage_waiting_for_the_backend_says_so_in_its_event_log(tmp_path, answers):
    @dg.asset(key=["lakehouse", "supplier_stats"])
    def succeeding(context, lineage: LineageResource):
        with lineage.asset_run(context, SUPPLIER_STATS):
            pass

    with lineage_backend(answers) as url:
        settings = Settings(state_dir=tmp_path, marquez_url=url)
        emitter = emitter_for(settings)
        emitter.emit(event(0))
        wait_for_sender(emitter)  # started, as in a run of any length
        try:
            with dg.instance_for_test() as instance:
                resources = {"lineage": LineageResource(environment=SettingsResource.of(settings))}
                result = dg.materialize([succeeding], resources=resources, instance=instance)
                warnings = [e.user_message for e in instance.all_logs(result.run_id) if e.level == logging.WARNING]
        finally:
            emitter.stop_sender()
    waiting = [warning for warning in warnings if "wait for the backend" in warning]
    if answers:
        assert waiting == [] and emitter.pending() == 0
    else:  # the run's four events and the one before it
        assert waiting == [
            f"lineage: 5 events wait for the backend in {emitter.log.segments_dir} (`lineage-assets lineage status` "
            "says why; `lineage-assets lineage flush` delivers them once it answers)"
        ]


def test_a_secret_a_failed_jobs_log_quotes_is_redacted_before_the_event_is_recorded(tmp_path):
    # Spark logs a slow listener event with the job's properties; the runner quotes the log's non-INFO
    # lines, that event's continuation lines among them, as the FAIL event's stack trace.
    secret, token = "s3-secret-of-this-test", 'token"with\\quotes'
    settings = Settings(state_dir=tmp_path, s3_secret_key=secret, catalog_token=token)
    log_text = (
        "26/12/01 06:45:06 INFO AsyncEventQueue: Process of event SparkListenerJobStart(3, {spark.rdd.compress=True,\n"
        f"batch = 1, spark.hadoop.fs.s3a.secret.key={secret}, spark.sql.catalog.lakehouse.token={token}, x=y}})\n"
        "pyspark.errors.exceptions.captured.StreamingQueryException: [STREAM_FAILED] Query terminated\n"
    )
    error = job_error(log_text, 1)
    assert secret in error.stack_trace  # what the log says reaches the event
    emitter = emitter_for(settings)
    emitter.emit(asset_event(RunState.FAIL, SUPPLIER_STATS, None, settings, run_id=str(uuid.uuid4()), error=error))

    (line,) = (emitter.folder / "segments").glob("*.jsonl")
    text = line.read_text()
    assert secret not in text and json.dumps(token)[1:-1] not in text
    (recorded,) = emitter.events()
    trace = recorded["run"]["facets"]["errorMessage"]["stackTrace"]
    assert f"secret.key={REDACTED}, spark.sql.catalog.lakehouse.token={REDACTED}, x=y" in trace
    assert "[STREAM_FAILED] Query terminated" in trace

"""No event waits behind a bad one, on the test stack's Marquez: a torn line, a line that is no event
and events Marquez refuses are set aside with the reason and every later event arrives; what is set
aside, or still waits, fails `lineage check --source marquez` instead of reading as a match."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import subprocess
import sys
import uuid

import pytest

from lineage_assets.lineage.delivery import Backend
from lineage_assets.lineage.emitter import LineageEmitter
from lineage_assets.lineage.marquez import MarquezApi
from lineage_assets.settings_environment import as_environment
from tests.conftest import wait_for

NAMESPACE = "delivery-probe"  # jobs of their own: the asset graph's check does not see them


def event(name: str, **changes) -> dict:
    return {
        "eventType": "COMPLETE",
        "eventTime": dt.datetime.now(dt.UTC).isoformat(),
        "run": {"runId": str(uuid.uuid4())},
        "job": {"namespace": NAMESPACE, "name": name},
        "producer": "urn:lineage-assets:tests",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        **changes,
    }


@pytest.fixture
def probe(stack, settings, tmp_path):
    """The test stack's servers with a state folder, so a lineage log, of the test's own."""
    return dataclasses.replace(settings, state_dir=tmp_path)


def cli(settings, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "lineage_assets.cli", "lineage", *arguments],
        capture_output=True,
        text=True,
        env={**os.environ, **as_environment(settings)},
        timeout=300,
    )


def test_a_torn_line_and_refused_events_are_set_aside_and_every_later_event_arrives(probe):
    emitter = LineageEmitter(probe.lineage_dir, Backend.marquez(probe.marquez_api_url))
    suffix = uuid.uuid4().hex[:8]
    emitter.emit(event(f"before-{suffix}"))
    with emitter.log.path.open("a") as log:  # what a crash mid-append leaves
        log.write(json.dumps(event(f"torn-{suffix}"))[:60])
    emitter.emit(
        event(
            f"bad-time-{suffix}",
            run={
                "runId": str(uuid.uuid4()),
                "facets": {
                    "nominalTime": {"_producer": "urn:t", "_schemaURL": "urn:t", "nominalStartTime": "not-a-time"}
                },
            },
        )
    )  # Marquez: HTTP 500, {"code": 400, …}
    emitter.emit(event(f"no-producer-{suffix}", producer=None))  # Marquez: HTTP 422
    emitter.emit(event(f"no-zone-{suffix}", eventTime="2026-11-26T10:00:00"))  # not an event's time
    emitter.emit('{"eventType": "START", ')  # not JSON
    emitter.emit(event(f"after-{suffix}"))
    assert emitter.flush(timeout=120)

    arrived = {job["name"] for job in MarquezApi.of(probe).jobs(NAMESPACE)}
    assert {f"before-{suffix}", f"after-{suffix}"} <= arrived
    assert not {name for name in arrived if name.endswith(suffix)} - {f"before-{suffix}", f"after-{suffix}"}
    reasons = [record["reason"] for record in emitter.log.dead_letters()]
    assert reasons[0].startswith("torn")
    assert (
        reasons[1].startswith("refused by the backend: HTTP 500 naming a client error 400")
        and "not-a-time" in reasons[1]
    )
    assert reasons[2].startswith("refused by the backend: HTTP 422") and "producer" in reasons[2]
    assert reasons[3:] == [
        "unreadable: eventTime '2026-11-26T10:00:00' is no ISO 8601 time with its zone",
        "unreadable: Expecting property name enclosed in double quotes: line 2 column 1 (char 24)",
    ]

    status = cli(probe, "status")
    assert status.returncode == 1 and "dead letters  5" in status.stdout and "0 events wait" in status.stdout
    checked = cli(probe, "check", "--source", "marquez")
    assert checked.returncode == 1, checked.stdout
    assert f"5 events were set aside in {emitter.log.dead_letters_path} and never delivered" in checked.stdout
    logged = cli(probe, "check")
    assert logged.returncode == 1
    # The torn tail is gone from the log; the lines that are no events are named.
    assert f"unreadable event at {emitter.log.path} line 4: eventTime '2026-11-26T10:00:00' is no" in logged.stdout
    assert f"unreadable event at {emitter.log.path} line 5: Expecting property name" in logged.stdout

    listed = cli(probe, "dead-letters")
    assert listed.returncode == 1 and "not-a-time" in listed.stdout
    assert cli(probe, "dead-letters", "--retry").stdout.startswith("the backend took 0 dead letters; 5 left")
    retried = [record["reason"] for record in emitter.log.dead_letters()]
    assert retried[0] == reasons[0] and retried[3:] == reasons[3:]  # still torn, still no event: said as before
    assert cli(probe, "dead-letters", "--discard").returncode == 0 and emitter.log.dead_letters() == []
    emitter.stop_sender()


def test_check_in_marquez_fails_while_events_wait(probe):
    emitter = LineageEmitter(probe.lineage_dir)  # records only, as a job whose sender has not run yet
    for n in range(3):
        emitter.emit(event(f"waiting-{n}"))
    checked = cli(probe, "check", "--source", "marquez", "--timeout", "0")  # no time to deliver first
    assert checked.returncode == 1
    assert f"3 events of {emitter.log.segments_dir} wait for delivery" in checked.stdout
    assert cli(probe, "flush").returncode == 0
    assert "wait for delivery" not in cli(probe, "check", "--source", "marquez").stdout


def test_events_go_to_the_backend_the_settings_name_now_even_those_emitted_before(probe):
    before = LineageEmitter(probe.lineage_dir, Backend.marquez("http://127.0.0.1:1"))  # settings of an earlier run
    suffix = uuid.uuid4().hex[:8]
    before.emit(event(f"while-down-{suffix}"))
    wait_for(before.sender_running, timeout=60, what="the first sender", poll=0.1)  # it retries the old backend
    after = LineageEmitter(probe.lineage_dir, Backend.marquez(probe.marquez_api_url))  # this run's settings
    after.emit(event(f"now-{suffix}"))
    assert after.flush(timeout=120)
    arrived = {job["name"] for job in MarquezApi.of(probe).jobs(NAMESPACE)}
    assert {f"while-down-{suffix}", f"now-{suffix}"} <= arrived
    assert cli(probe, "status").stdout.count(f"backend       http {probe.marquez_api_url}") == 1
    before.stop_sender()
    after.stop_sender()

"""The event log in segments: rotation, retention that never loses an undelivered event, delivery
that resumes across segments after a sender is killed, and a log from before segments read on upgrade.

The backend is openlineage-python's own FileTransport, or its HttpTransport posting to a sink in this
test that can hold a request (to kill the sender while it waits on one)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lineage_assets.lineage.delivery import Backend, Delivery
from lineage_assets.lineage.emitter import LineageEmitter
from lineage_assets.lineage.event_log import EventLog
from tests.unit.test_emitter import backend, event, received

SEGMENT = 4096  # bytes: an event is about 280, so a segment holds about 15


def emitted(folder, count: int, first: int = 0, **log) -> LineageEmitter:
    """An emitter recording ``count`` events into ``folder``, none delivered (no backend)."""
    emitter = LineageEmitter(folder, None, **{"segment_bytes": SEGMENT, **log})
    for n in range(first, first + count):
        emitter.emit(event(n))
    return emitter


def numbers(events: list[dict]) -> list[int]:
    return [int(e["run"]["runId"][-12:]) for e in events]


def test_the_log_rotates_into_segments_named_by_their_first_offset_and_reads_as_one(tmp_path):
    log = emitted(tmp_path / "lineage", 100).log
    segments = log.segments()
    assert len(segments) >= 6
    for segment, following in zip(segments, segments[1:]):
        assert following.base == segment.base + segment.size()  # no byte of the log lost or counted twice
        assert SEGMENT <= segment.size() < SEGMENT + 400  # a segment ends at a line once it is full
    lines = list(log.lines())
    assert [line.offset for line in lines[1:]] == [line.end for line in lines[:-1]]
    assert numbers(log.read()[0]) == list(range(100))
    middle = lines[37]  # in a later segment: reading from an offset starts there
    assert numbers([json.loads(line.text) for line in log.lines(middle.offset)]) == list(range(37, 100))
    segment, offset = next((s, middle.offset - s.base) for s in reversed(segments) if s.base <= middle.offset)
    log.advance(middle.offset)
    assert log.position() == (segment.path, offset) and offset > 0
    assert log.pending() == 63


def test_retention_removes_only_delivered_old_segments_never_an_undelivered_event(tmp_path):
    down = tmp_path / "backend"  # missing: every delivery fails
    emitter = LineageEmitter(tmp_path / "lineage", backend(down), segment_bytes=SEGMENT, retention_days=1)
    for n in range(60):
        emitter.emit(event(n))
    emitter.stop_sender()
    log = emitter.log
    long_ago = time.time() - 3 * 86400
    for segment in log.segments():
        os.utime(segment.path, (long_ago, long_ago))
    assert log.remove_expired() == []  # old, but nothing delivered
    down.mkdir()
    assert emitter.flush(timeout=30)
    for n in range(60, 80):  # rotates: removes the old segments now delivered
        emitter.emit(event(n))
    emitter.stop_sender()
    assert emitter.flush(timeout=30)
    assert received(down) == list(range(80))  # every event delivered once, in order
    kept = log.segments()
    assert kept[0].base > 0 and all(segment.path.stat().st_mtime > long_ago for segment in kept)
    assert numbers(log.read()[0]) == list(range(80 - len(list(log.lines())), 80))  # what is left reads on

    fresh = emitted(tmp_path / "fresh", 60, retention_days=1).log
    for segment in fresh.segments():
        os.utime(segment.path, (long_ago, long_ago))
    first, second, third, *_ = fresh.segments()
    fresh.advance(third.base)  # delivered up to the third segment
    assert fresh.remove_expired() == [first.path, second.path]


class Sink(BaseHTTPRequestHandler):
    """An OpenLineage HTTP backend that keeps what it is sent; it holds the request after ``hold_after``
    events until ``release`` is set, and drops it (its sender was killed meanwhile)."""

    events: list[dict] = []
    hold_after = 0
    release = threading.Event()

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if len(Sink.events) >= Sink.hold_after and not Sink.release.is_set():
            Sink.release.wait(60)
            return
        Sink.events.append(body)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture()
def sink():
    Sink.events, Sink.release = [], threading.Event()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    Sink.release.set()
    server.shutdown()


def test_delivery_resumes_across_segments_after_the_sender_is_killed_mid_segment(tmp_path, sink):
    folder = tmp_path / "lineage"
    log = emitted(folder, 200).log
    segments = log.segments()
    lines = list(log.lines())
    Sink.hold_after = next(n for n, line in enumerate(lines) if line.offset > segments[3].base + 600)
    Delivery(folder).name_backend(Backend({"transport": {"type": "http", "url": sink, "timeout": 120}}))
    sending = subprocess.Popen(
        [sys.executable, "-m", "lineage_assets.lineage.sender", str(folder)], stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 60
    while len(Sink.events) < Sink.hold_after or log.cursor() == 0:
        assert time.monotonic() < deadline and sending.poll() is None, "the sender did not deliver"
        time.sleep(0.05)
    os.kill(sending.pid, signal.SIGKILL)  # held on an event in the middle of the fourth segment
    sending.wait()
    cursor = log.cursor()
    assert segments[3].base < cursor < segments[4].base  # the cursor names a place inside it
    Sink.release.set()
    assert Delivery(folder).flush(timeout=60)
    # The rest, in order, from the last place recorded: at most a batch since the cursor moved goes again.
    again = next(n for n, line in enumerate(lines) if line.offset == cursor)
    assert numbers(Sink.events) == [*range(Sink.hold_after), *range(again, 200)]
    assert 0 <= Sink.hold_after - again < 50


def test_a_log_from_before_segments_is_read_and_delivered_on_upgrade(tmp_path):
    folder = tmp_path / "lineage"
    folder.mkdir()
    lines = [json.dumps(event(n)) + "\n" for n in range(30)]
    (folder / "events.jsonl").write_text("".join(lines))  # as the single-file log left it
    delivered = sum(len(line.encode()) for line in lines[:12])
    (folder / "delivered.offset").write_text(str(delivered))
    target = tmp_path / "backend"
    target.mkdir()
    emitter = LineageEmitter(folder, backend(target), segment_bytes=SEGMENT)
    assert not (folder / "events.jsonl").exists()
    assert [segment.base for segment in emitter.log.segments()] == [0]
    assert numbers(emitter.events()) == list(range(30))
    assert emitter.pending() == 18
    emitter.emit(event(30))  # the first append after the upgrade: the old segment is full, a new one starts
    assert [segment.base for segment in emitter.log.segments()] == [0, sum(len(line.encode()) for line in lines)]
    assert emitter.flush(timeout=30)
    emitter.stop_sender()
    assert received(target) == list(range(12, 31))  # what the old log had not delivered, then the new


def test_both_a_single_file_and_its_first_segment_is_a_clear_error(tmp_path):
    folder = tmp_path / "lineage"
    emitted(folder, 3)
    (folder / "events.jsonl").write_text(json.dumps(event(9)) + "\n")
    with pytest.raises(RuntimeError, match="events.jsonl and .*00000000000000000000.jsonl both exist"):
        EventLog(folder)

"""Delivery of OpenLineage events that never blocks, fails or loses: a durable log plus a sender process.

``emit`` writes the event as one line of ``<state>/lineage/events.jsonl`` (the record of every event
the project emitted; appends are serialized across processes with a file lock) and makes sure a
sender process is running; it never raises and never waits on the network. The sender
(``lineage_assets.lineage.sender``) delivers the log, in order, to the transport openlineage-python
configures from the standard sources (``openlineage.yml``, ``OPENLINEAGE_URL``, ``OPENLINEAGE__…``
variables) or, when they name none, to Marquez (the local stack's, or ``LINEAGE_ASSETS_MARQUEZ_URL``).
It records how far it got in a cursor file, so when the backend is slow or down, events wait in the
log and go out in order when it is back, from this sender or the next one (or ``lineage-assets
lineage flush``). One process at a time sends (a lock on
the cursor), so no event is sent twice by two senders.

Why a process, not a thread: a sender thread's JSON and HTTP work holds the job's GIL, and the job's
thread then waits for it (up to Python's 5 ms switch interval) in the middle of an ``emit``.
Why not openlineage-python's own async transport: it buffers in memory, so events are lost when the
process ends while the backend is down; here the log is the buffer.
"""

from __future__ import annotations

import enum
import fcntl
import functools
import json
import logging
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import attrs
from openlineage.client import OpenLineageClient

from lineage_assets.settings import Settings

log = logging.getLogger(__name__)

BACKEND_VARIABLE = "LINEAGE_ASSETS_LINEAGE_BACKEND"  # how the sender process learns its Backend
STARTUP_S = 10.0  # a sender takes well under this to start; it lingers longer (sender.LINGER_S)


@attrs.frozen
class Backend:
    """Where events are delivered: an ``OpenLineageClient`` configuration (``None``: the standard
    sources, read by the sender process from the environment and working folder it inherits)."""

    client_config: dict | None = None

    def transport(self):
        """openlineage-python's transport for this configuration; None when it resolves to nothing
        (its fallback, the console, is not a lineage backend)."""
        client_log = logging.getLogger("openlineage.client.client")
        level = client_log.level
        client_log.setLevel(logging.ERROR)  # its "no configuration, printing to console" notice: no backend is fine here
        try:
            transport = OpenLineageClient(config=self.client_config).transport
        finally:
            client_log.setLevel(level)
        return None if transport is None or transport.kind in ("console", "noop") else transport

    @classmethod
    def marquez(cls, url: str) -> Backend:
        return cls({"transport": {"type": "http", "url": url}})

    def to_json(self) -> str:
        return json.dumps(attrs.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Backend:
        return cls(**json.loads(text))


def configured_backend(marquez_url: str) -> Backend:
    """The backend openlineage-python's standard configuration names, or else Marquez at ``marquez_url``."""
    standard = Backend()
    return standard if standard.transport() is not None else Backend.marquez(marquez_url)


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(field.name for field in attrs.fields(cls))


def plain(value):
    """An openlineage-python event as JSON-ready data, exactly as its ``Serde.to_dict`` gives it (None
    left out, enums as values, no empty objects in lists) in one pass: Serde's ``attr.asdict`` and
    then a second walk cost the job's thread about twice as much, on every event."""
    kind = value.__class__
    if kind in (str, int, float, bool):
        return value
    if attrs.has(kind):
        return {name: item for name in _field_names(kind) if (item := plain(getattr(value, name))) is not None}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {key: item for key, raw in value.items() if (item := plain(raw)) is not None}
    if isinstance(value, (list, tuple)):
        return [item for raw in value if (item := plain(raw)) is not None and item != {}]
    return value


def event_line(event) -> str:
    """One line of the event log: a serialized event as it is, anything else serialized."""
    text = event if isinstance(event, str) else json.dumps(
        plain(event), sort_keys=True, default=lambda o: f"<<non-serializable: {type(o).__qualname__}>>")  # as Serde
    return text.replace("\n", " ") + "\n"


@contextmanager
def file_lock(path: Path, blocking: bool = True):
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield None
            return
        try:
            yield handle
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class LineageEmitter:
    def __init__(self, folder: Path, backend: Backend | None = None):
        self.folder = folder
        self.log_path = folder / "events.jsonl"
        self.cursor_path = folder / "delivered.offset"
        self.sender_lock_path = folder / "sender.lock"
        self.backend = backend
        self.emit_failures = 0
        self._transport = None
        self._spawned: subprocess.Popen | None = None
        self._spawned_at = 0.0
        folder.mkdir(parents=True, exist_ok=True)

    # --- the caller's side: cheap, never raises ---------------------------------------------
    def emit(self, event) -> None:
        try:
            line = event_line(event)
            with file_lock(self.folder / "events.lock") as _, self.log_path.open("a") as out:
                out.write(line)
        except Exception:  # lineage must never fail the data job; the failure is counted and logged
            self.emit_failures += 1
            log.exception("could not record an OpenLineage event")
            return
        if self.backend is not None:
            self._ensure_sender()

    def _ensure_sender(self) -> None:
        """Start a sender process unless one runs. A sender re-reads the log after it lets go of its
        lock, so an event appended before this check is seen by the sender holding the lock, or
        finds the lock free here. A sender lingers far longer than its start-up takes, so one this
        process started moments ago and still alive is starting or sending, not leaving."""
        starting = self._spawned is not None and self._spawned.poll() is None and time.monotonic() - self._spawned_at < STARTUP_S
        try:
            if starting or self.sender_running():
                return
            with (self.folder / "sender.log").open("ab") as sender_log:
                self._spawned = subprocess.Popen(
                    [sys.executable, "-m", "lineage_assets.lineage.sender", str(self.folder)],
                    env={**os.environ, BACKEND_VARIABLE: self.backend.to_json()}, stdin=subprocess.DEVNULL,
                    stdout=sender_log, stderr=sender_log, start_new_session=True)
            self._spawned_at = time.monotonic()
        except Exception:  # the events wait in the log for the next sender or `lineage flush`
            log.exception("could not start the OpenLineage sender; events wait in %s", self.log_path)

    def stop_sender(self) -> None:
        """Stop the sender this emitter started, if it runs; what it has not delivered stays in the log."""
        if self._spawned is not None and self._spawned.poll() is None:
            self._spawned.terminate()
            self._spawned.wait()

    def sender_running(self) -> bool:
        """True while some process (a sender, or a flush) holds the sender lock."""
        with file_lock(self.sender_lock_path, blocking=False) as lock:
            return lock is None

    # --- delivery -------------------------------------------------------------------------
    @property
    def transport(self):
        if self._transport is None and self.backend is not None:
            self._transport = self.backend.transport()
        return self._transport

    def pending(self) -> int:
        """Events in the log not yet delivered."""
        offset = self._cursor()
        if not self.log_path.exists():
            return 0
        with self.log_path.open("rb") as source:
            source.seek(offset)
            return sum(1 for line in source if line.strip())

    def _cursor(self) -> int:
        try:
            return int(self.cursor_path.read_text().strip() or 0)
        except FileNotFoundError:
            return 0

    def _advance(self, offset: int) -> None:
        temporary = self.cursor_path.with_suffix(".tmp")
        temporary.write_text(str(offset))
        temporary.replace(self.cursor_path)

    def deliver_pending(self, should_stop=lambda: False) -> bool | None:
        """Send what the log holds beyond the cursor, in order. True when all is delivered, False
        when the backend refused or was unreachable, None when another process is sending or
        ``should_stop()`` turned true."""
        if self.transport is None or not self.log_path.exists():
            return True
        with file_lock(self.sender_lock_path, blocking=False) as lock:
            return None if lock is None else self.deliver_locked(should_stop)

    def deliver_locked(self, should_stop=lambda: False, batch: int = 50) -> bool | None:
        """``deliver_pending`` for the holder of the sender lock. ``should_stop()`` is checked between
        events. The cursor advances every ``batch`` events: after a crash at most that many are sent
        again, each with its run id, so no run is ever doubled."""
        if self.transport is None or not self.log_path.exists():
            return True
        offset = start = self._cursor()
        sent = 0
        try:
            with self.log_path.open("rb") as source:
                source.seek(offset)
                for line in source:
                    if should_stop():
                        return None
                    if line.strip():
                        try:
                            self.transport.emit(json.loads(line))
                        except Exception as error:
                            log.warning("lineage backend unavailable (%s); events wait in %s", error, self.log_path)
                            return False
                        sent += 1
                    offset += len(line)
                    if sent % batch == 0:
                        self._advance(offset)
        finally:
            if offset != start:
                self._advance(offset)
        return True

    def flush(self, timeout: float = 10.0, retry_seconds: float = 0.5) -> bool:
        """Deliver everything within ``timeout`` (here, or by waiting for a running sender); what is
        left stays in the log for later."""
        deadline = time.monotonic() + timeout
        while True:
            if self.deliver_pending(should_stop=lambda: time.monotonic() > deadline) or self.pending() == 0:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(min(retry_seconds, max(0.0, deadline - time.monotonic())))

    def mark(self, name: str) -> bool:
        """True exactly once per ``name`` (a path below the lineage folder), across processes: for an
        event that one of several processes sends (a Dagster run's START and end, from whichever of
        its steps comes first)."""
        marker = self.folder / name
        marker.parent.mkdir(parents=True, exist_ok=True)
        try:
            marker.open("x").close()
            return True
        except FileExistsError:
            return False

    def marked(self, name: str) -> bool:
        return (self.folder / name).exists()

    def events(self, run_id: str | None = None) -> list[dict]:
        """Every event recorded (of one run, when given), in order (for `lineage export`, the lineage
        check, ending a deployment's run once, and tests)."""
        if not self.log_path.exists():
            return []
        with self.log_path.open() as source:
            recorded = [json.loads(line) for line in source if line.strip() and (run_id is None or run_id in line)]
        return [event for event in recorded if run_id is None or event["run"]["runId"] == run_id]


_EMITTERS: dict[Path, LineageEmitter] = {}


def emitter_for(settings: Settings) -> LineageEmitter:
    """One emitter per lineage folder and process, delivering to the configured backend."""
    if settings.lineage_dir not in _EMITTERS:
        _EMITTERS[settings.lineage_dir] = LineageEmitter(settings.lineage_dir, configured_backend(settings.marquez_api_url))
    return _EMITTERS[settings.lineage_dir]

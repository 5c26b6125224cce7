"""Delivery of OpenLineage events that never blocks, fails or loses: a durable log plus a sender.

``emit`` writes the event as one line of ``<state>/lineage/events.jsonl`` (the record of every event
the project emitted; appends are serialized across processes with a file lock) and wakes a
background sender; it never raises and never waits on the network. The sender delivers the log, in
order, to the transport openlineage-python configures from the standard sources (``openlineage.yml``,
``OPENLINEAGE_URL``, ``OPENLINEAGE__…`` variables), or to ``LINEAGE_ASSETS_MARQUEZ_URL``. It records
how far it got in a cursor file, so when the backend is slow or down, events wait in the log and go
out in order when it is back, from this process or the next one (``lineage-assets lineage flush``).
One process at a time sends (a lock on the cursor), so no event is sent twice by two senders.

Why not openlineage-python's own async transport: it buffers in memory, so events are lost when the
process ends while the backend is down; here the log is the buffer.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from openlineage.client import OpenLineageClient
from openlineage.client.serde import Serde

log = logging.getLogger(__name__)


def configured_transport(marquez_url: str = ""):
    """The transport openlineage-python resolves from the standard configuration; None when nothing
    is configured (its fallback, the console, is not a lineage backend)."""
    config = {"transport": {"type": "http", "url": marquez_url}} if marquez_url and not os.environ.get("OPENLINEAGE_URL") else None
    client_log = logging.getLogger("openlineage.client.client")
    level = client_log.level
    client_log.setLevel(logging.ERROR)  # its "no configuration, printing to console" notice: no backend is fine here
    try:
        transport = OpenLineageClient(config=config).transport
    finally:
        client_log.setLevel(level)
    return None if transport is None or transport.kind in ("console", "noop") else transport


@contextmanager
def _locked(path: Path, blocking: bool = True):
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
    def __init__(self, folder: Path, transport=None, retry_seconds: tuple[float, float] = (0.5, 30.0),
                 poll_seconds: float = 1.0):
        self.folder = folder
        self.log_path = folder / "events.jsonl"
        self.cursor_path = folder / "delivered.offset"
        self.transport = transport
        self.retry_seconds = retry_seconds
        self.poll_seconds = poll_seconds
        self.emit_failures = 0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._sender: threading.Thread | None = None
        folder.mkdir(parents=True, exist_ok=True)

    # --- the caller's side: cheap, never raises ---------------------------------------------
    def emit(self, event) -> None:
        try:
            line = (event if isinstance(event, str) else Serde.to_json(event)).replace("\n", " ") + "\n"
            with _locked(self.folder / "events.lock") as _, self.log_path.open("a") as out:
                out.write(line)
        except Exception:  # lineage must never fail the data job; the failure is counted and logged
            self.emit_failures += 1
            log.exception("could not record an OpenLineage event")
            return
        if self.transport is not None:
            self._ensure_sender()
            self._wake.set()

    # --- the sender ---------------------------------------------------------------------------
    def _ensure_sender(self) -> None:
        if self._sender is None or not self._sender.is_alive():
            self._sender = threading.Thread(target=self._send_loop, name="openlineage-sender", daemon=True)
            self._sender.start()

    def _send_loop(self) -> None:
        delay = self.retry_seconds[0]
        while not self._stop.is_set():
            self._wake.wait(self.poll_seconds)
            self._wake.clear()
            try:
                delivered = self.deliver_pending(should_stop=self._stop.is_set)
            except Exception:  # the sender must outlive any surprise; what is undelivered stays in the log
                log.exception("OpenLineage sender failed; retrying")
                delivered = False
            if delivered is False:
                self._stop.wait(delay)
                delay = min(delay * 2, self.retry_seconds[1])
            else:
                delay = self.retry_seconds[0]

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

    def deliver_pending(self, should_stop=lambda: False, batch: int = 50) -> bool | None:
        """Send what the log holds beyond the cursor, in order. True when all is delivered, False
        when the backend refused or was unreachable, None when another process is sending or
        ``should_stop()`` turned true (checked between events). The cursor advances every ``batch`` events: after a crash at most that
        many are sent again, each with its run id, so no run is ever doubled."""
        if self.transport is None or not self.log_path.exists():
            return True
        with _locked(self.folder / "sender.lock", blocking=False) as lock:
            if lock is None:
                return None
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

    def flush(self, timeout: float = 10.0) -> bool:
        """Try to deliver everything within ``timeout``; what is left stays in the log for later."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.deliver_pending(should_stop=lambda: time.monotonic() > deadline):
                return True
            time.sleep(min(self.retry_seconds[0], max(0.0, deadline - time.monotonic())))
        return self.pending() == 0

    def close(self, timeout: float = 10.0) -> bool:
        """Stop the sender thread, then try to deliver what is left for up to ``timeout`` seconds."""
        self._stop.set()
        self._wake.set()
        if self._sender is not None:
            self._sender.join()  # it stops between two events
            self._sender = None
        return self.flush(timeout)

    def events(self) -> list[dict]:
        """Every event recorded, in order (for `lineage export`, the lineage check and tests)."""
        if not self.log_path.exists():
            return []
        with self.log_path.open() as source:
            return [json.loads(line) for line in source if line.strip()]

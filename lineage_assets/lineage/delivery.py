"""Delivery of a lineage folder's event log, in order, to the backend the settings name.

The backend is recorded in the folder (``backend.json``) by whoever emits or flushes; the process
delivering reads it again before each event, so a change of settings is followed at once and no event
goes to a backend the settings no longer name. One process at a time delivers (a lock in the folder).
A line that is not an event, or an event the backend refuses as invalid, is set aside as a dead
letter with the reason and delivery goes on; a backend that is down or slow keeps every event
waiting, in order.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
from openlineage.client import OpenLineageClient
from openlineage.client.transport.transport import Transport

from lineage_assets.connections import ca_bundle
from lineage_assets.lineage.event_log import DeadLetter, EventLog, Line, file_lock, lineage_event
from lineage_assets.private_files import replace_private
from lineage_assets.settings import Settings
from lineage_assets.settings_environment import secret_in_effect

log = logging.getLogger(__name__)


@attrs.frozen
class Backend:
    """Where events are delivered: an ``OpenLineageClient`` configuration (``None``: the standard
    sources, read by the delivering process from the environment and working folder it inherits)."""

    client_config: dict[str, Any] | None = None

    def transport(self) -> Transport | None:
        """openlineage-python's transport for this configuration; None when it resolves to nothing (its
        fallback, the console, is not a lineage backend, and the durable transport would log to itself).
        Made by ``OpenLineageClient``, whose transport alone is used: it is what reads the standard
        sources (``openlineage.yml``, ``OPENLINEAGE_URL``, ``OPENLINEAGE__…``) when no configuration is given."""
        client_log = logging.getLogger("openlineage.client.client")
        level = client_log.level
        client_log.setLevel(
            logging.ERROR
        )  # its "no configuration, printing to console" notice: no backend is fine here
        try:
            transport = OpenLineageClient(config=self.client_config).transport
        finally:
            client_log.setLevel(level)
        return None if transport is None or transport.kind in ("console", "noop", "durable") else transport

    @classmethod
    def marquez(cls, url: str, api_key: str = "", ca_bundle: Path | None = None) -> Backend:
        """openlineage-python's HTTP transport to Marquez at ``url``: its ``api_key`` auth, and TLS
        verified against ``ca_bundle`` (the transport hands ``verify`` to requests, which takes a
        bundle's path as well as a flag)."""
        # Its bounded retries end with the last response, not urllib3's bare RetryError: the body of a
        # 500 tells a refused event from a failing server.
        transport: dict[str, Any] = {"type": "http", "url": url, "retry": {"raise_on_status": False}}
        if api_key:
            transport["auth"] = {"type": "api_key", "apiKey": api_key}
        if ca_bundle:
            transport["verify"] = str(ca_bundle)
        return cls({"transport": transport})

    def to_json(self) -> str:
        return json.dumps(attrs.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Backend:
        return cls(**json.loads(text))


def marquez_backend(settings: Settings) -> Backend:
    """The settings' Marquez as a backend, with their API key and CA."""
    return Backend.marquez(settings.marquez_api_url, secret_in_effect(settings, "marquez_api_key"), ca_bundle(settings))


def configured_backend(settings: Settings) -> Backend:
    """The backend openlineage-python's standard configuration names, or else the settings' Marquez."""
    standard = Backend()
    return standard if standard.transport() is not None else marquez_backend(settings)


def rejection(error: Exception) -> str | None:
    """Why the backend refused the event itself (it will refuse it again), or None: the backend is
    unavailable or failing, and the event waits. A 4xx other than a timeout or a rate limit is a
    refusal; so is a 5xx whose body names a client error (Marquez answers an unreadable
    ``eventTime`` with HTTP 500 and ``{"code": 400, …}``)."""
    response = getattr(error, "response", None)
    if response is None or (status := getattr(response, "status_code", None)) is None:
        return None
    body = (response.text or "").strip()
    if 400 <= status < 500 and status not in (408, 429):
        return f"HTTP {status}: {body[:500]}"
    if status >= 500:
        try:
            code = json.loads(body).get("code")
        except (ValueError, AttributeError):
            return None
        if isinstance(code, int) and 400 <= code < 500:
            return f"HTTP {status} naming a client error {code}: {body[:500]}"
    return None


def emit_data(transport: Transport, event: dict[str, Any]) -> None:
    """Send an event as JSON data (as the log gives it back) as it is: openlineage-python's transports serialize it."""
    transport.emit(event)  # type: ignore[arg-type]  # openlineage-python types emit() for event objects only


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


UNAVAILABLE = "backend unavailable"  # how the status's last error begins while the backend is down


def delivered_since_error(status: dict[str, str]) -> bool:
    """Whether the status (``Delivery.status``) notes a delivery after its last error (both to the second)."""
    return "last_error" in status and status.get("delivered_at", "") > status["at"]


def backend_down(status: dict[str, str]) -> bool:
    """Whether the backend was unavailable at the last try the status notes."""
    return status.get("last_error", "").startswith(UNAVAILABLE) and not delivered_since_error(status)


class Delivery:
    """The delivering side of a lineage folder: its backend, its lock, its status."""

    def __init__(self, folder: Path):
        self.log = EventLog(folder)
        self.backend_path = folder / "backend.json"
        self.lock_path = folder / "sender.lock"
        self.status_path = folder / "delivery.json"
        self._backend_seen: tuple[float, str] | None = None
        self._transport: Transport | None = None

    # --- the backend the settings name --------------------------------------------------------
    def name_backend(self, backend: Backend) -> None:
        """Record ``backend`` as where the folder's events go, unless it already is."""
        text = backend.to_json()
        try:
            if self.backend_path.read_text() == text:
                return
        except FileNotFoundError:
            pass
        replace_private(self.backend_path, text)  # a transport's configuration may hold its credentials

    def backend(self) -> Backend | None:
        try:
            return Backend.from_json(self.backend_path.read_text())
        except FileNotFoundError:
            return None

    def transport(self) -> Transport | None:
        """The transport of the backend recorded now (made again when the record changes)."""
        try:
            stamp = self.backend_path.stat().st_mtime_ns
        except FileNotFoundError:
            return None
        if self._backend_seen is None or self._backend_seen[0] != stamp:
            text = self.backend_path.read_text()
            if self._backend_seen is None or self._backend_seen[1] != text:
                self._transport = Backend.from_json(text).transport()
            self._backend_seen = (stamp, text)
        return self._transport

    # --- delivering ---------------------------------------------------------------------------
    def running(self) -> bool:
        """True while some process (a sender, or a flush) holds the delivery lock."""
        with file_lock(self.lock_path, blocking=False) as lock:
            return lock is None

    def deliver_pending(self, should_stop: Callable[[], bool] = lambda: False) -> bool | None:
        """Send what the log holds beyond the cursor, in order. True when all is delivered or set
        aside, False when the backend is unavailable, None when another process is delivering or
        ``should_stop()`` turned true."""
        with file_lock(self.lock_path, blocking=False) as lock:
            return None if lock is None else self.deliver_locked(should_stop)

    def deliver_locked(self, should_stop: Callable[[], bool] = lambda: False, batch: int = 50) -> bool | None:
        """``deliver_pending`` for the holder of the lock. ``should_stop()`` is checked between
        events. The cursor advances every ``batch`` events: after a crash at most that many are sent
        again, each with its run id, so no run is ever doubled."""
        offset = start = self.log.cursor()
        sent = 0
        try:
            for line in self.log.lines(offset):
                if should_stop():
                    return None
                transport = self.transport()
                if transport is None:
                    return True  # no backend named: the log keeps the events
                if offset == start:  # a backend that hangs shows as a send without an answer, not as an older error
                    self._note(sending_since=_now())
                if not self._send(transport, line):
                    return False
                sent += 1
                offset = line.end
                if sent % batch == 0:
                    self.log.advance(offset)
        finally:
            if offset != start:
                self.log.advance(offset)
                self._note(sending_since=None, delivered_at=_now())
            elif sent == 0 and "sending_since" in self.status():
                self._note(sending_since=None)
        return True

    def _send(self, transport: Transport, line: Line) -> bool:
        """True once ``line`` is delivered or set aside; False when the backend is unavailable."""
        try:
            event = lineage_event(line.text)
        except ValueError as error:
            self._set_aside(line, f"unreadable: {str(error).splitlines()[0]}")
            return True
        try:
            emit_data(transport, event)
        except Exception as error:
            if (reason := rejection(error)) is None:
                self._record(f"{UNAVAILABLE}: {error}")
                log.warning("lineage backend unavailable (%s); events wait in %s", error, self.log.path)
                return False
            self._set_aside(line, f"refused by the backend: {reason}")
        return True

    def _set_aside(self, line: Line, reason: str) -> None:
        self.log.set_aside(line, reason)
        self._record(f"set aside the event at byte {line.offset}: {reason}")
        log.warning(
            "lineage event at byte %d of %s set aside (%s); delivery goes on", line.offset, self.log.path, reason
        )

    def _record(self, last_error: str) -> None:
        self._note(last_error=last_error, at=_now())

    def _note(self, **changes: str | None) -> None:
        """Change the status's entries (None: remove one), keeping the others."""
        status = {**self.status(), **changes}
        replace_private(
            self.status_path, json.dumps({key: value for key, value in status.items() if value is not None})
        )

    def status(self) -> dict[str, str]:
        """What the delivery last noted: ``last_error`` and ``at`` (when), ``sending_since`` (a send
        under way: the first of a pass, unanswered so far), ``delivered_at`` (the last pass that
        delivered); each only once it happened."""
        try:
            status: dict[str, str] = json.loads(self.status_path.read_text())
        except (FileNotFoundError, ValueError):
            return {}
        return status

    def flush(self, timeout: float = 10.0, retry_seconds: float = 0.5) -> bool:
        """Deliver everything within ``timeout`` (here, or by waiting for a running sender); what is
        left stays in the log for later."""
        deadline = time.monotonic() + timeout
        while True:
            if self.deliver_pending(should_stop=lambda: time.monotonic() > deadline) or self.log.pending() == 0:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(min(retry_seconds, max(0.0, deadline - time.monotonic())))

    def delivered_by_sender(self, timeout: float, poll_seconds: float = 0.25) -> bool:
        """Whether the sender (which the emits that appended the events started) delivers what waits
        within ``timeout``: False at once when its status notes the backend down. Nothing is sent from
        this process, whose one try at a backend that is down could outlast ``timeout`` (its retries)."""
        deadline = time.monotonic() + timeout
        while self.log.pending():
            if backend_down(self.status()) or time.monotonic() >= deadline:
                return False
            time.sleep(poll_seconds)
        return True

    def retry_dead_letters(self) -> tuple[int, list[DeadLetter]]:
        """Send each dead letter again, in order: how many the backend took, and those left (a refused
        one with the backend's latest reason). Under the delivery lock, so the log's own delivery waits meanwhile."""
        with file_lock(self.lock_path):
            transport = self.transport()
            if transport is None:
                return 0, self.log.dead_letters()
            taken = 0
            left: list[DeadLetter] = []
            for record in self.log.dead_letters():
                try:
                    emit_data(transport, lineage_event(record["line"]))
                    taken += 1
                except ValueError:
                    left.append(record)  # still no event: why it was set aside (torn, unreadable) stays true
                except Exception as error:
                    reason = rejection(error)
                    left.append(
                        {
                            **record,
                            "reason": f"refused by the backend: {reason}" if reason else f"{UNAVAILABLE}: {error}",
                        }
                    )
            self.log.replace_dead_letters(left)
            return taken, left

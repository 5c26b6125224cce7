"""The durable transport: an openlineage-python ``Transport`` that writes each event to a lineage
folder's log and leaves delivery to a sender process, so emitting never waits on the network and an
event outlives a backend that is down, a process that ends and a machine that restarts.

Any openlineage-python client can use it, e.g. from ``openlineage.yml`` (``type: durable`` once this
module is imported)::

    transport:
      type: lineage_assets.lineage.transport.DurableTransport
      folder: /var/lib/lineage
      backend: {type: http, url: http://127.0.0.1:5000}

Why a process, not a thread: a sender thread's JSON and HTTP work holds the emitting job's GIL, and
the job's thread then waits for it (up to Python's 5 ms switch interval) in the middle of an ``emit``.
Why not openlineage-python's own async transport: it buffers in memory, so events are lost when the
process ends while the backend is down; here the log is the buffer.
"""

from __future__ import annotations

import enum
import functools
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import attr
import attrs
from openlineage.client.client import Event
from openlineage.client.transport import register_transport
from openlineage.client.transport.transport import Config, Transport

from lineage_assets.lineage.delivery import Backend, Delivery
from lineage_assets.lineage.event_log import SEGMENT_BYTES, DeadLetter, EventLog
from lineage_assets.lineage.sender import STARTUP_S

log = logging.getLogger(__name__)

# What the log takes: an openlineage-python event, one serialized already, or one as JSON-ready data.
Emittable = Event | str | dict[str, Any]


@functools.cache
def _field_names(cls: type) -> tuple[str, ...] | None:
    """An attrs class's field names; None for any other class (asked once per class: ``attrs.has``
    on every value was a third of an event's serialization)."""
    return tuple(field.name for field in attrs.fields(cls)) if attrs.has(cls) else None


def plain(value: object) -> object:
    """An openlineage-python event as JSON-ready data, exactly as its ``Serde.to_dict`` gives it (None
    left out, enums as values, no empty objects in lists) in one pass: Serde's ``attr.asdict`` and
    then a second walk cost the job's thread about twice as much, on every event."""
    kind: type = value.__class__
    if kind in (str, int, float, bool):
        return value
    if (names := _field_names(kind)) is not None:
        return {name: item for name in names if (item := plain(getattr(value, name))) is not None}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {key: item for key, raw in value.items() if (item := plain(raw)) is not None}
    if isinstance(value, (list, tuple)):
        return [item for raw in value if (item := plain(raw)) is not None and item != {}]
    return value


REDACTED = "*********(redacted)"  # as Spark writes a value its spark.redaction.regex hides


def event_line(event: Emittable, redacted: tuple[str, ...] = ()) -> str:
    """One line of the event log: a serialized event as it is, anything else serialized; each of
    ``redacted`` (secrets as JSON writes them) replaced wherever it occurs, a job's log quoted in an
    error facet included."""
    text = (
        event
        if isinstance(event, str)
        else json.dumps(plain(event), sort_keys=True, default=lambda o: f"<<non-serializable: {type(o).__qualname__}>>")
    )  # as Serde
    for secret in redacted:
        text = text.replace(secret, REDACTED)
    return text.replace("\n", " ") + "\n"


@attr.define
class DurableConfig(Config):
    folder: str  # the lineage folder: its event log, delivery cursor and dead letters
    backend: Backend | None = None  # where the sender delivers; None: the log only records
    segment_bytes: int = SEGMENT_BYTES  # the log starts a new segment file at this size
    retention_days: float | None = None  # a delivered segment is removed after this; None: kept
    # Values never recorded nor delivered: each is redacted in every event (and left out of the repr).
    secrets: tuple[str, ...] = attr.field(default=(), repr=False)

    @classmethod
    def from_dict(cls, params: dict[str, Any]) -> DurableConfig:
        missing = [key for key in ("folder", "backend") if not params.get(key)]
        if missing:
            raise RuntimeError(
                f"the durable transport needs {' and '.join(f'`{key}`' for key in missing)} "
                "(backend: the transport events are delivered to, e.g. {type: http, url: …})"
            )
        retention = params.get("retention_days")
        return cls(
            folder=str(params["folder"]),
            backend=Backend({"transport": dict(params["backend"])}),
            segment_bytes=int(params.get("segment_bytes") or SEGMENT_BYTES),
            retention_days=float(retention) if retention else None,
        )


@register_transport
class DurableTransport(Transport):
    kind = "durable"
    config_class = DurableConfig

    def __init__(self, config: DurableConfig):
        self.config = config
        self.log = EventLog(Path(config.folder), config.segment_bytes, config.retention_days)
        self.delivery = Delivery(Path(config.folder))
        self._redacted = tuple(json.dumps(secret)[1:-1] for secret in config.secrets)  # as events hold them
        self._named = False
        self._spawned: subprocess.Popen[bytes] | None = None
        self._spawned_at = 0.0

    def emit(self, event: Emittable) -> None:
        self.log.append(event_line(event, self._redacted))
        if self.config.backend is not None:
            if not self._named:
                self._name_backend()
            self._ensure_sender()

    def flush(self, timeout: float) -> bool:
        """Deliver everything within ``timeout``, to this transport's backend."""
        self._name_backend()
        return self.delivery.flush(timeout=timeout)

    def retry_dead_letters(self) -> tuple[int, list[DeadLetter]]:
        self._name_backend()
        return self.delivery.retry_dead_letters()

    def _name_backend(self) -> None:
        """This transport's backend is where the folder's events go from now on (the sender follows)."""
        if self.config.backend is not None:
            self.delivery.name_backend(self.config.backend)
            self._named = True

    def send_pending(self) -> None:
        """Start a sender when events wait and none runs: those of a process that was gone before its
        sender had delivered them (a run's container stops its sender with it)."""
        if self.config.backend is not None and self.log.pending():
            self._name_backend()
            self._ensure_sender()

    def close(self, timeout: float = -1) -> bool:
        return self.flush(timeout=timeout if timeout >= 0 else 3600.0)

    def _ensure_sender(self) -> None:
        """Start a sender process unless one runs. A sender re-reads the log after it lets go of its
        lock, so an event appended before this check is seen by the sender holding the lock, or
        finds the lock free here. A sender lingers far longer than its start-up takes, so one this
        process started moments ago and still alive is starting or sending, not leaving."""
        starting = (
            self._spawned is not None
            and self._spawned.poll() is None
            and time.monotonic() - self._spawned_at < STARTUP_S
        )
        try:
            if starting or self.delivery.running():
                return
            with (self.log.folder / "sender.log").open("ab") as sender_log:
                self._spawned = subprocess.Popen(
                    [sys.executable, "-m", "lineage_assets.lineage.sender", str(self.log.folder)],
                    env=os.environ.copy(),
                    stdin=subprocess.DEVNULL,
                    stdout=sender_log,
                    stderr=sender_log,
                    start_new_session=True,
                )
            self._spawned_at = time.monotonic()
        except Exception:  # the events wait in the log for the next sender or `lineage flush`
            log.exception("could not start the OpenLineage sender; events wait in %s", self.log.path)

    def stop_sender(self) -> None:
        """Stop the sender this transport started, if it runs; what it has not delivered stays in the log."""
        if self._spawned is not None and self._spawned.poll() is None:
            self._spawned.terminate()
            self._spawned.wait()

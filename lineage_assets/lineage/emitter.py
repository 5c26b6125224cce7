"""The project's lineage folder: events recorded and delivered through the durable transport
(``lineage.transport``) and read back from its log (``lineage.event_log``).

``emit`` never raises and never waits on the network: the event is one line of
``<state>/lineage/segments/`` and a sender process delivers the log, in order, to the transport
openlineage-python configures from the standard sources (``openlineage.yml``, ``OPENLINEAGE_URL``,
``OPENLINEAGE__…`` variables) or, when they name none, to Marquez (the local stack's, or
``LINEAGE_ASSETS_MARQUEZ_URL``). See ``lineage.delivery`` for what happens to events the backend
refuses and while it is down.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from lineage_assets.connections import secrets_in_effect
from lineage_assets.lineage.delivery import Backend, configured_backend
from lineage_assets.lineage.event_log import SEGMENT_BYTES, is_run_event
from lineage_assets.lineage.transport import DurableConfig, DurableTransport, Emittable
from lineage_assets.settings import Settings

log = logging.getLogger(__name__)


class LineageEmitter:
    def __init__(
        self,
        folder: Path,
        backend: Backend | None = None,
        segment_bytes: int = SEGMENT_BYTES,
        retention_days: float | None = None,
        secrets: tuple[str, ...] = (),
    ):
        self.folder = folder
        self.backend = backend  # None: the log only records
        self.transport = DurableTransport(DurableConfig(str(folder), backend, segment_bytes, retention_days, secrets))
        self.log = self.transport.log
        self.delivery = self.transport.delivery
        self.emit_failures = 0  # events that could not be recorded, since this emitter was made
        self.last_failure = ""  # why the last of them could not

    def emit(self, event: Emittable) -> None:
        try:
            self.transport.emit(event)
        except Exception as error:  # lineage must never fail the data job: counted, for the run to report it
            self.emit_failures += 1
            self.last_failure = f"{type(error).__name__}: {error}"
            log.exception("could not record an OpenLineage event")

    def flush(self, timeout: float = 10.0) -> bool:
        """Deliver everything within ``timeout`` (here, or by waiting for a running sender); what is
        left stays in the log for later."""
        return self.transport.flush(timeout)

    def waiting_line(self) -> str:
        """What a run or the demo says when events are left waiting for the backend."""
        return (
            f"lineage: {self.pending()} events wait for the backend in {self.log.segments_dir} "
            "(`lineage-assets lineage status` says why; `lineage-assets lineage flush` delivers them once it answers)"
        )

    def send_pending(self) -> None:
        """Deliver in the background what waits (see ``DurableTransport.send_pending``)."""
        self.transport.send_pending()

    def pending(self) -> int:
        """Events in the log not yet delivered nor set aside."""
        return self.log.pending()

    def sender_running(self) -> bool:
        return self.delivery.running()

    def stop_sender(self) -> None:
        self.transport.stop_sender()

    def events(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """Every run event recorded (of one run, when given), in order (for the lineage check and
        queries, ending a deployment's run once, and tests)."""
        return [event for event in self.recorded(run_id) if is_run_event(event)]

    def design(self) -> list[dict[str, Any]]:
        """The static events of the designed graph recorded (``lineage.design``), in order."""
        return [event for event in self.recorded() if not is_run_event(event)]

    def recorded(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """Every event recorded, in order; a line that is none is named in a warning and skipped."""
        events, unreadable = self.log.read(run_id)
        for line in unreadable:
            log.warning("skipped %s", line)
        return events


_EMITTERS: dict[tuple[Path, str], LineageEmitter] = {}


def emitter_for(settings: Settings) -> LineageEmitter:
    """One emitter per lineage folder, Marquez URL and process, delivering to the configured backend:
    its first event names that backend for the folder's sender."""
    key = (settings.lineage_dir, settings.marquez_api_url)
    if key not in _EMITTERS:
        _EMITTERS[key] = LineageEmitter(
            settings.lineage_dir,
            configured_backend(settings),
            settings.lineage_segment_mb * 2**20,
            settings.lineage_retention_days or None,
            # A failed job's error facet quotes its log, which may show what the job was configured with.
            secrets_in_effect(settings),
        )
    return _EMITTERS[key]

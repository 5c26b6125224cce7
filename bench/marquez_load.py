"""Marquez under the history's load: how fast the project's sender delivers a backlog compared with
posting the same events straight to Marquez, and what Marquez's own answers cost afterwards.

Two copies of the scale benchmark's history (``lineage_history.write_history``), each under a
lineage namespace of its own, are recorded with no backend. One is posted straight to Marquez by
openlineage-python's HTTP transport, one event after another on one connection, as fast as Marquez
takes them: the ceiling for delivery in order (Marquez 0.51 has no batch endpoint). The other is
appended to an event log and delivered by the project's own delivery (``lineage flush``: the
durable log, its cursor, the backend read again per event). Each goes in two halves, in the order
direct, sender, sender, direct. Marquez's lineage graph around ``supplier_stats``, its job list and
``lineage check --source marquez`` are timed with half the history in, with all of it, and after
Marquez's own retention has removed the older half: what its answers cost grows with what it holds
(its job list aggregates the facets of every run it holds), and its retention is the lever that
bounds it.

Marquez starts empty (its database made again, then migrated by its start): what it answers costs
grows with all it holds, so a run on a stack that earlier runs and benchmarks fed would measure
their leftovers too.

Quick: two days of history; full: a week, ending now (a year, about 400,000 events, would take
Marquez hours to take on this machine: its per-event rate measured here says how many).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import subprocess
import tempfile
import time
from pathlib import Path

from bench.lineage_history import write_history
from bench.measure import percentile
from lineage_assets.datasets import SUPPLIER_STATS
from lineage_assets.lineage.delivery import emit_data, marquez_backend
from lineage_assets.lineage.emitter import LineageEmitter
from lineage_assets.lineage.event_log import EventLog, lineage_event
from lineage_assets.lineage.marquez import MarquezApi
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.settings import PROJECT_ROOT, Settings
from lineage_assets.settings_environment import as_environment
from lineage_assets.stack.services.marquez import MARQUEZ, marquez_command
from lineage_assets.stack.services.storage import empty_database
from lineage_assets.stack.supervisor import Supervisor

CALLS = 20
LINEAGE_ASSETS = PROJECT_ROOT / ".venv" / "bin" / "lineage-assets"
DELIVERY_TIMEOUT_S = 3 * 3600


def history(
    settings: Settings, folder: Path, namespace: str, days: int, start: dt.datetime
) -> tuple[Settings, list[list[bytes]]]:
    """``days`` of history from ``start`` under ``namespace``, recorded into a folder of its own: the
    settings of a state folder beside it (empty) and the history's lines in two halves."""
    own = dataclasses.replace(settings, state_dir=folder / "state", lineage_namespace=namespace)
    staged = LineageEmitter(folder / "history", None)
    write_history(staged, own, days, drift_day=days // 2, start=start)
    lines = [line.text for line in staged.log.lines()]
    return own, [lines[: len(lines) // 2], lines[len(lines) // 2 :]]


def post_directly(settings: Settings, lines: list[bytes]) -> float:
    """Seconds to post ``lines``' events to Marquez, in order, on one connection."""
    transport = marquez_backend(settings).transport()  # the client the sender uses
    if transport is None:
        raise RuntimeError(f"no lineage transport for Marquez at {settings.marquez_api_url}")
    started = time.monotonic()
    for text in lines:
        emit_data(transport, lineage_event(text))
    return time.monotonic() - started


def deliver_by_sender(settings: Settings, lines: list[bytes]) -> float:
    """Seconds for ``lineage flush`` (the project's delivery, as its sender runs it) to deliver
    ``lines``, appended to the settings' event log, to Marquez."""
    log = EventLog(settings.lineage_dir)
    for text in lines:
        log.append(text.decode())
    started = time.monotonic()
    subprocess.run(
        [str(LINEAGE_ASSETS), "lineage", "flush", "--timeout", str(DELIVERY_TIMEOUT_S)],
        env={**os.environ, **as_environment(settings)},
        check=True,
        capture_output=True,
        timeout=DELIVERY_TIMEOUT_S + 60,
    )
    return time.monotonic() - started


def timed(call, count: int) -> dict:
    took = []
    for _ in range(count):
        started = time.monotonic()
        call()
        took.append(time.monotonic() - started)
    return {"p50_s": round(percentile(took, 0.5), 3), "p95_s": round(percentile(took, 0.95), 3)}


def ask(api: MarquezApi, settings: Settings, calls: int) -> dict:
    """Marquez's lineage graph around ``supplier_stats``, the job list of ``settings``' namespace and
    ``lineage check --source marquez`` there, each timed over ``calls`` calls (the check a quarter as many)."""
    node = SUPPLIER_STATS.identity(settings).node
    check = [str(LINEAGE_ASSETS), "lineage", "check", "--source", "marquez"]
    check_environment = {**os.environ, **as_environment(settings)}
    return {
        "lineage around supplier_stats": timed(lambda: api.lineage(*node), calls),
        "job list": timed(lambda: api.jobs(settings.lineage_namespace), calls),
        "lineage check --source marquez": timed(
            lambda: subprocess.run(check, env=check_environment, capture_output=True, timeout=600), max(2, calls // 4)
        ),
    }


def apply_retention(settings: Settings, days: int) -> float:
    """Seconds Marquez's own retention (its ``db-retention`` command, what ``MARQUEZ_RETENTION_DAYS``
    schedules hourly) takes to remove what is older than ``days`` (by event time)."""
    started = time.monotonic()
    subprocess.run(
        marquez_command(settings, "db-retention", "--retention-days", str(days)),
        check=True,
        capture_output=True,
        timeout=DELIVERY_TIMEOUT_S,
    )
    return time.monotonic() - started


def empty_marquez(settings: Settings) -> None:
    """The stack's Marquez restarted on an empty database (``up`` waits until it answers)."""
    supervisor = Supervisor(settings)
    supervisor.down([MARQUEZ.name])
    empty_database(settings, settings.marquez_database)
    supervisor.up([MARQUEZ.name])


def run(environment: SettingsResource, quick: bool) -> dict:
    settings = environment.settings
    empty_marquez(settings)
    days = 2 if quick else 7
    api = MarquezApi.of(settings, timeout=600)
    # The history ends now, so that Marquez's retention (by event time) can keep its newer half.
    start = dt.datetime.now(dt.UTC).replace(minute=0, second=0, microsecond=0) - dt.timedelta(days=days)
    with tempfile.TemporaryDirectory() as folder:
        stamp = time.strftime("%Y%m%d%H%M%S")
        direct_settings, direct = history(settings, Path(folder) / "direct", f"load_direct_{stamp}", days, start)
        sender_settings, sender = history(settings, Path(folder) / "sender", f"load_sender_{stamp}", days, start)
        events = sum(map(len, direct))
        # In the order direct, sender, sender, direct by halves: Marquez warms up and its tables grow
        # as it takes events, and neither way should have all of one or the other.
        direct_s = post_directly(direct_settings, direct[0])
        sender_s = deliver_by_sender(sender_settings, sender[0])
        queries = {"half": ask(api, sender_settings, CALLS // 4)}
        sender_s += deliver_by_sender(sender_settings, sender[1])
        direct_s += post_directly(direct_settings, direct[1])
        left = EventLog(sender_settings.lineage_dir).pending()
        queries["full"] = ask(api, sender_settings, CALLS)
        retention_s = apply_retention(settings, days // 2)
        queries["after retention"] = ask(api, sender_settings, CALLS)
    ratio = direct_s / sender_s
    return {
        "name": "marquez_load",
        "target": "the sender's rate >= 0.8x posting directly; every event delivered",
        "met": ratio >= 0.8 and left == 0,
        "days": days,
        "events": events,
        "direct_events_per_s": round(events / direct_s, 1),
        "sender_events_per_s": round(events / sender_s, 1),
        "sender_to_direct": round(ratio, 3),
        "left_undelivered": left,
        "year_at_direct_rate_h": round(420_000 / (events / direct_s) / 3600, 1),
        "retention_days": days // 2,
        "retention_s": round(retention_s, 1),
        "queries": queries,
    }


def summary(result: dict) -> str:
    at = {
        name: ", ".join(f"{query} p50 {q['p50_s']} s (p95 {q['p95_s']})" for query, q in asked.items())
        for name, asked in result["queries"].items()
    }
    return (
        f"{result['days']} days, {result['events']:,} events: sender {result['sender_events_per_s']}/s, "
        f"direct {result['direct_events_per_s']}/s ({result['sender_to_direct']}×; a year at the direct rate "
        f"{result['year_at_direct_rate_h']} h). Marquez at half the history: {at['half']}; "
        f"at all of it: {at['full']}; after its retention kept {result['retention_days']} days "
        f"({result['retention_s']} s): {at['after retention']}"
    )

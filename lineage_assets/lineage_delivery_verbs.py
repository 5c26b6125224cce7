"""The `lineage` verbs that deliver the events and say how delivery stands: publish, export, flush,
status, dead-letters, retire; and what every verb reading the lineage shares: its options, the delivery
of what waits before Marquez is read, and the materializations Dagster recorded without their lineage."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from lineage_assets.settings import Settings

if TYPE_CHECKING:
    from dagster import DagsterInstance


def deliver_before_reading_marquez(args: argparse.Namespace, emitter) -> None:
    """With ``--source marquez``, what the log holds but Marquez has not received yet would read as
    gaps: it is delivered first, for up to ``--timeout`` seconds."""
    if args.source == "marquez" and emitter.pending() and not emitter.flush(timeout=args.timeout):
        print(f"lineage {args.action}: {emitter.pending()} events still wait for Marquez; it reads what Marquez has")


def reads_the_lineage(verb: argparse.ArgumentParser, *, answers_as_json: bool = True) -> None:
    """The options of a verb that reads the recorded lineage: from the event log or from Marquez."""
    verb.add_argument(
        "--source",
        choices=["log", "marquez"],
        default="log",
        help="the project's event log (default) or what Marquez's API shows",
    )
    verb.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        help="with --source marquez: how long to deliver the events waiting for it first (default 30 s)",
    )
    if answers_as_json:
        verb.add_argument("--json", action="store_true", help="the answer as JSON")


@contextlib.contextmanager
def dagster_home_instance(settings: Settings) -> Iterator[DagsterInstance | None]:
    """The Dagster instance in DAGSTER_HOME (a folder, with or without a ``dagster.yaml``, as Dagster
    opens it) or else the settings' own (`make dev`'s, the demo's); None where there is none yet."""

    from lineage_assets.instance import dagster_home, open_instance

    if variable := os.environ.get("DAGSTER_HOME"):
        home = Path(variable).expanduser()
        if not (home.is_absolute() and home.is_dir()):
            raise ValueError(f"DAGSTER_HOME={variable!r} is not a folder's absolute path (Dagster's instance folder)")
    else:
        home = dagster_home(settings)
        if not home.is_dir():
            yield None
            return
    with open_instance(settings, home) as instance:
        yield instance


def without_lineage(instance: DagsterInstance | None, emitter) -> list[str]:
    """The materializations Dagster recorded whose lineage the log lacks; none without an instance."""
    from lineage_assets.assets.unrecorded import materializations_without_lineage

    return [] if instance is None else materializations_without_lineage(instance, emitter.events())


def _publish(args: argparse.Namespace, settings: Settings) -> int:
    from lineage_assets.assets.design import published_line
    from lineage_assets.definitions import publish_definitions

    published = publish_definitions(settings, force=args.force)
    for subject in published.sent:
        print(f"published {subject}")
    for subject in published.retired:
        print(f"retired {subject}")
    print(published_line(published))
    return 0


def _export(args: argparse.Namespace, settings: Settings) -> int:
    from lineage_assets.lineage.emitter import emitter_for

    recorded = emitter_for(settings).recorded()
    with open(args.out, "w") as out:
        for event in recorded:
            out.write(json.dumps(event) + "\n")
    print(f"wrote {len(recorded)} events to {args.out}")
    return 0


def _flush(args: argparse.Namespace, settings: Settings) -> int:
    from lineage_assets.lineage.emitter import emitter_for

    emitter = emitter_for(settings)
    delivered = emitter.flush(timeout=args.timeout)
    left = "all events delivered" if delivered else f"{emitter.pending()} events still wait"
    print(f"{left} ({emitter.log.segments_dir})")
    return 0 if delivered else 1


def _retire(args: argparse.Namespace, settings: Settings) -> int:
    from lineage_assets.lineage.check import log_design, retire
    from lineage_assets.lineage.emitter import emitter_for
    from lineage_assets.lineage.marquez import MarquezApi

    hidden = retire(MarquezApi.of(settings), settings, log_design(emitter_for(settings).log))
    print(
        f"hid in Marquez the jobs renamed or retired since: {', '.join(hidden)}"
        if hidden
        else "no renamed or retired job shown in Marquez"
    )
    return 0


def _status(args: argparse.Namespace, settings: Settings) -> int:
    from lineage_assets.lineage.emitter import emitter_for

    return _delivery_status(settings, emitter_for(settings))


def _delivery_status(settings: Settings, emitter) -> int:
    """What waits, what was set aside, where it goes and the last error (dated against what came after
    it); 0 when all is delivered."""
    from lineage_assets.lineage.delivery import delivered_since_error

    log, delivery = emitter.log, emitter.delivery
    waiting, dead = log.pending(), len(log.dead_letters())
    backend = delivery.backend()
    transport = (backend.client_config or {}).get("transport", {}) if backend else {}
    target = " ".join(str(transport[key]) for key in ("type", "url") if key in transport) or (
        "the standard openlineage-python configuration" if backend else "none (the log only records)"
    )
    segments = log.segments()
    size = sum(segment.size() for segment in segments)
    print(
        f"event log     {log.segments_dir}: {len(segments)} segment{'s' * (len(segments) != 1)}, {size / 2**20:.1f} MiB"
    )
    at, offset = log.position()
    print(f"delivered to  {at.name} byte {offset}: {waiting} events wait for delivery")
    print(
        f"dead letters  {dead}"
        + (f" in {log.dead_letters_path} (`lineage-assets lineage dead-letters`)" if dead else "")
    )
    print(f"backend       {target}")
    status, running = delivery.status(), delivery.running()
    since = status.get("sending_since") if running else None
    print(f"sender        {'running' if running else 'not running'}" + (f": sending since {since}" if since else ""))
    if "delivered_at" in status:
        print(f"delivered     last at {status['delivered_at']}")
    if "last_error" in status:
        if since and status["at"] < since:
            before = " (before the sending under way)"
        elif delivered_since_error(status):
            before = f" (before the last delivery at {status['delivered_at']})"
        else:
            before = ""
        print(f"last error    {status['at']}: {status['last_error']}{before}")
    with dagster_home_instance(settings) as instance:
        lost = without_lineage(instance, emitter)
    print(
        f"unrecorded    {len(lost)} materializations without their lineage"
        + (" (`lineage-assets lineage check` names them)" if lost else "")
    )
    return 1 if waiting or dead or lost else 0


def _dead_letters(args: argparse.Namespace, settings: Settings) -> int:
    """List the dead letters; ``--retry`` sends them again, ``--discard`` drops them once read."""
    from lineage_assets.lineage.emitter import emitter_for

    emitter = emitter_for(settings)
    log = emitter.log
    if args.retry:
        taken, left = emitter.transport.retry_dead_letters()
        print(f"the backend took {taken} dead letters; {len(left)} left")
    elif args.discard:
        dropped = len(log.dead_letters())
        log.replace_dead_letters([])
        print(f"dropped {dropped} dead letters")
        return 0
    records = log.dead_letters()
    for record in records:
        print(f"{record['at']}  byte {record['offset']}  {record['reason']}\n    {record['line'][:160]}")
    if not args.retry:
        print(f"{len(records)} dead letters in {log.dead_letters_path}")
    return 1 if records else 0


def add_delivery_verbs(verb: Callable[..., argparse.ArgumentParser]) -> None:
    """These verbs, each with its options, made by ``verb`` (the `lineage` command's)."""
    publish = verb(
        "publish",
        _publish,
        "send the designed graph",
        "A static event per dataset and job, where it changed since the last publish.",
    )
    publish.add_argument("--force", action="store_true", help="send every event of the design, changed or not")

    export = verb("export", _export, "write every event as JSON lines")
    export.add_argument("--out", default="lineage-events.jsonl", help="the output file (default lineage-events.jsonl)")

    flush = verb("flush", _flush, "deliver the waiting events to the configured backend", "Exit 1 if some still wait.")
    flush.add_argument("--timeout", type=float, default=30.0, help="how long to keep trying (default 30 s)")

    verb(
        "status",
        _status,
        "what waits for delivery, what was set aside, the last error",
        "Also the materializations without their lineage; exit 1 unless all is delivered.",
    )

    dead_letters = verb(
        "dead-letters",
        _dead_letters,
        "list the events delivery set aside",
        "Those unreadable, or refused by the backend.",
    )
    what = dead_letters.add_mutually_exclusive_group()
    what.add_argument("--retry", action="store_true", help="send them again (those refused again stay)")
    what.add_argument("--discard", action="store_true", help="drop them (after reading them)")

    verb(
        "retire",
        _retire,
        "hide in Marquez the jobs renamed or no longer defined",
        "Their runs stay.",
    )

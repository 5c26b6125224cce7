"""The `lineage-assets lineage` command: a sub-command for each verb, with its own options and help."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from lineage_assets.settings import PROJECT_ROOT, Settings

if TYPE_CHECKING:
    from dagster import DagsterInstance


def _check(args: argparse.Namespace, settings: Settings) -> int:
    """The lineage against the asset graph (from the event log or Marquez), or with ``--design`` the
    jobs' plans against the designed lineage; 1 on any gap."""
    if args.design:
        return _design_check(settings)
    from lineage_assets.assets.in_progress import lineage_runs_in_progress
    from lineage_assets.lineage.check import check_log, check_marquez_with_design, log_notes, report
    from lineage_assets.lineage.emitter import emitter_for
    from lineage_assets.lineage.marquez import MarquezApi
    from lineage_assets.streaming.deployments import deployments_in_progress

    emitter = emitter_for(settings)
    _deliver_before_reading_marquez(args, emitter)
    with _dagster_instance(settings) as instance:
        in_progress = deployments_in_progress(settings)  # a deployment runs until stopped: its run has no end yet
        in_progress |= {} if instance is None else lineage_runs_in_progress(instance)
        if args.source == "marquez":
            where = f"Marquez at {settings.marquez_api_url}"
            gaps, notes = check_marquez_with_design(MarquezApi.of(settings), settings, emitter.log, in_progress)
        else:
            where = f"the lineage in {emitter.log.segments_dir}"
            gaps = check_log(emitter.log, settings, in_progress) + _without_lineage(instance, emitter)
            notes = log_notes(emitter.log, in_progress)
    print(report(gaps, where, notes))
    return 1 if gaps else 0


def _deliver_before_reading_marquez(args: argparse.Namespace, emitter) -> None:
    """With ``--source marquez``, what the log holds but Marquez has not received yet would read as
    gaps: it is delivered first, for up to ``--timeout`` seconds."""
    if args.source == "marquez" and emitter.pending() and not emitter.flush(timeout=args.timeout):
        print(f"lineage {args.action}: {emitter.pending()} events still wait for Marquez; it reads what Marquez has")


def _in_process_spark(settings: Settings):
    """The local Spark session the design-time verbs plan the jobs in, on empty inputs."""
    from lineage_assets.spark_conf import in_process_session

    return in_process_session(settings, {"spark.master": "local[1]", "spark.ui.enabled": "false"})


def _design_check(settings: Settings) -> int:
    from lineage_assets.lineage import design_time

    gaps = design_time.design_gaps(_in_process_spark(settings), settings, None)
    if not gaps:
        print("lineage check --design: the jobs' plans make the designed lineage")
        return 0
    print(f"lineage check --design: {len(gaps)} differences between the jobs' plans and the designed lineage:")
    for gap in gaps:
        print(f"  - {gap}")
    print("  (`lineage-assets lineage accept` makes the plans the designed lineage, for review)")
    return 1


def _accept(args: argparse.Namespace, settings: Settings) -> int:
    """The jobs' plans (of ``DATASET``, or all) written into the designed lineage, for review."""
    from lineage_assets.column_lineage import DESIGNED_LINEAGE
    from lineage_assets.lineage import design_time
    from lineage_assets.lineage.observed import ObservationError

    if args.subject and args.subject not in design_time.DESIGNS:
        known = ", ".join(design_time.DESIGNS)
        print(f"lineage-assets: {args.subject!r} is no dataset a Spark job writes: one of {known}", file=sys.stderr)
        return 2
    try:
        changed = design_time.accept(_in_process_spark(settings), settings, [args.subject] if args.subject else None)
    except ObservationError as error:
        print(f"lineage accept: nothing written: {error}", file=sys.stderr)
        return 1
    where = DESIGNED_LINEAGE.relative_to(PROJECT_ROOT)
    print(
        f"lineage accept: {', '.join(changed)} changed in {where}" if changed else f"lineage accept: {where} unchanged"
    )
    return 0


def _diff(args: argparse.Namespace, settings: Settings) -> int:
    """The changes, as text or (``--json``) for a pull request; exit 1 when a plan cannot be made."""
    from lineage_assets.lineage import design_time

    try:
        changes, failures = design_time.diff(_in_process_spark(settings), settings, args.base)
    except ValueError as error:
        print(f"lineage diff: {error}", file=sys.stderr)
        return 2
    if args.json:
        entries = [dataclasses.asdict(change) for change in changes]
        print(json.dumps({"base": args.base, "changes": entries, "failures": failures}, indent=2))
    else:
        print(f"lineage diff against {args.base}: {len(changes) or 'no'} changes to the designed lineage")
        for change in changes:
            print(change.text())
        for failure in failures:
            print(f"cannot be planned: {failure}")
    return 1 if failures else 0


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


def _impact_or_trace(args: argparse.Namespace, settings: Settings) -> int:
    from lineage_assets.lineage.emitter import emitter_for
    from lineage_assets.lineage.marquez import MarquezApi
    from lineage_assets.lineage.queries import ask

    emitter = emitter_for(settings)
    _deliver_before_reading_marquez(args, emitter)
    marquez = MarquezApi.of(settings) if args.source == "marquez" else None
    answer = ask(args.action, args.subject, settings, log=emitter.log, marquez=marquez)
    print(json.dumps(answer.as_dict(), indent=2) if args.json else answer.tree(indirect=args.all))
    return 0


@contextlib.contextmanager
def _dagster_instance(settings: Settings) -> Iterator[DagsterInstance | None]:
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


def _without_lineage(instance: DagsterInstance | None, emitter) -> list[str]:
    """The materializations Dagster recorded whose lineage the log lacks; none without an instance."""
    from lineage_assets.assets.unrecorded import materializations_without_lineage

    return [] if instance is None else materializations_without_lineage(instance, emitter.events())


def _utc_time(text: str) -> dt.datetime:
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{text!r} is no ISO 8601 time (e.g. 2026-11-21T12:00:00)") from error
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def _runs(args: argparse.Namespace, settings: Settings) -> list:
    """The runs ``provenance`` and ``reached`` read: from the event log, or what Marquez shows."""
    from lineage_assets.lineage.emitter import emitter_for
    from lineage_assets.lineage.marquez import MarquezApi
    from lineage_assets.lineage.run_records import marquez_runs
    from lineage_assets.lineage.summary import runs as summary_runs

    emitter = emitter_for(settings)
    _deliver_before_reading_marquez(args, emitter)
    if args.source == "marquez":
        return marquez_runs(MarquezApi.of(settings), settings)
    return summary_runs(emitter.log).records()


def _provenance(args: argparse.Namespace, settings: Settings) -> int:
    from lineage_assets.lineage.provenance import provenance
    from lineage_assets.lineage.queries import resolve

    dataset = resolve(args.subject, settings).dataset
    answer = provenance(
        _runs(args, settings), dataset, settings, partition=args.partition, version=args.version, at=args.at
    )
    print(json.dumps(answer.as_dict(), indent=2) if args.json else answer.tree())
    return 0


def _reached(args: argparse.Namespace, settings: Settings) -> int:
    from lineage_assets.lineage.provenance import reached

    answer = reached(_runs(args, settings), args.subject, settings)
    if not args.rematerialize:
        print(json.dumps(answer.as_dict(), indent=2) if args.json else answer.tree())
        return 0
    from lineage_assets.backfills import launch_backfills

    print(answer.tree())
    title = f"rebuild what run {args.subject} reached"
    for key, backfill in launch_backfills(settings.dagster_url, answer.partitions(), title).items():
        days = ", ".join(answer.partitions()[key])
        print(f"backfill {backfill}: {key} {days} ({settings.dagster_url}/runs/b/{backfill})")
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
    with _dagster_instance(settings) as instance:
        lost = _without_lineage(instance, emitter)
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


def _show(args: argparse.Namespace, settings: Settings) -> int:
    from lineage_assets.datasets import DATASETS
    from lineage_assets.lineage.emitter import emitter_for
    from lineage_assets.lineage.graph import LineageGraph
    from lineage_assets.lineage.page import render
    from lineage_assets.lineage.summary import summary

    log = emitter_for(settings).log
    source = Path(args.events) if args.events else log.segments_dir
    # As the user would name it from here: a page (or a picture of it) carries no path of the machine.
    here = Path.cwd().resolve()
    shown = source.resolve().relative_to(here) if source.resolve().is_relative_to(here) else source
    if args.events:
        with source.open() as lines:
            recorded = [json.loads(line) for line in lines if line.strip()]
        graph, count = LineageGraph.from_events(recorded), len(recorded)
    else:
        known = summary(log)
        graph, count = known.graph, known.run_events
    labels = {}
    for dataset in DATASETS.values():
        identity = dataset.identity(settings)
        labels[(identity.namespace, identity.name)] = dataset.key
    page = render(graph, labels, "lineage_assets: OpenLineage graph", f"{count} events in {shown}")
    try:
        page.write(Path(args.out), Path(args.png) if args.png else None)
    except (RuntimeError, subprocess.SubprocessError) as error:
        print(f"lineage-assets: {error}", file=sys.stderr)
        return 1
    print(f"wrote {', '.join(filter(None, (args.out, args.png)))}")
    return 0


DATASET_HELP = "a dataset by its asset key (e.g. lakehouse/supplier_stats) or its OpenLineage namespace:name"


def _reads_the_lineage(verb: argparse.ArgumentParser, *, answers_as_json: bool = True) -> None:
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


def add_lineage_command(commands: argparse._SubParsersAction) -> None:
    lineage = commands.add_parser(
        "lineage",
        help="check, query, draw or deliver the OpenLineage events",
        description="Check, query, draw or deliver the OpenLineage events; `lineage VERB --help` for a verb's options.",
    )
    verbs = lineage.add_subparsers(dest="action", required=True, metavar="VERB")

    def verb(name: str, handler, summary: str, details: str = "") -> argparse.ArgumentParser:
        sentence = f"{summary[0].upper()}{summary[1:]}."
        parser = verbs.add_parser(name, help=summary, description=f"{sentence} {details}" if details else sentence)
        parser.set_defaults(handler=handler)
        return parser

    check = verb(
        "check",
        _check,
        "compare the lineage with the asset graph",
        "Every gap between the recorded lineage and the asset graph; exit 1 on any.",
    )
    check.add_argument(
        "--design",
        action="store_true",
        help="instead, each Spark job's plan on empty inputs held against the designed lineage (no stack needed)",
    )
    _reads_the_lineage(check, answers_as_json=False)

    accept = verb(
        "accept",
        _accept,
        "write the jobs' derivations at design time into the designed lineage",
        "For review, as a diff of lineage_assets/designed_lineage.json.",
    )
    accept.add_argument("subject", metavar="DATASET", nargs="?", default="", help="only this dataset (default: all)")

    diff = verb(
        "diff",
        _diff,
        "what the working tree's jobs change in the designed lineage",
        "Against the designed lineage as checked in at --base, and what each change reaches downstream; "
        "exit 1 when a job cannot be planned.",
    )
    diff.add_argument("--base", default="HEAD", help="the git revision to compare with (default HEAD)")
    diff.add_argument("--json", action="store_true", help="the changes as JSON, for a pull request")

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

    show = verb("show", _show, "draw the graph as a self-contained HTML page (and PNG)")
    show.add_argument("--out", default="lineage.html", help="the HTML page (default lineage.html)")
    show.add_argument("--png", help="also render the page, column edges shown, to this PNG (needs Chromium)")
    show.add_argument("--events", help="read an exported JSON-lines file instead of the event log")

    for name, direction, subject in (
        ("impact", "everything downstream of", "DATASET[.COLUMN]"),
        ("trace", "everything upstream of", "DATASET.COLUMN"),
    ):
        query = verb(name, _impact_or_trace, f"{direction} {subject}", f"{subject}: {DATASET_HELP}.")
        query.add_argument("subject", metavar=subject, help=DATASET_HELP)
        query.add_argument("--all", action="store_true", help="every edge, those only INDIRECT (filters, joins, …) too")
        _reads_the_lineage(query)

    provenance = verb(
        "provenance",
        _provenance,
        "the runs and versions that made one version of DATASET",
        "Down to the offsets of the source topic; by default its latest version.",
    )
    provenance.add_argument("subject", metavar="DATASET", help=DATASET_HELP)
    version = provenance.add_mutually_exclusive_group()
    version.add_argument("--partition", help="the version of this partition (a day, YYYY-MM-DD)")
    version.add_argument("--version", help="this version (e.g. a table's snapshot id)")
    version.add_argument("--at", type=_utc_time, help="the version as of this time (ISO 8601, UTC unless it says)")
    _reads_the_lineage(provenance)

    reached_verb = verb("reached", _reached, "every run, version and partition downstream of the run RUN_ID")
    reached_verb.add_argument("subject", metavar="RUN_ID", help="an OpenLineage run id")
    reached_verb.add_argument(
        "--rematerialize",
        action="store_true",
        help="launch a Dagster backfill of exactly the partitions reached, through the webserver (make dev)",
    )
    _reads_the_lineage(reached_verb)

    verb(
        "retire",
        _retire,
        "hide in Marquez the jobs renamed or no longer defined",
        "Their runs stay.",
    )

"""The `lineage-assets lineage` command: a sub-command for each verb, with its own options and help.
Here the verbs that hold the lineage against its design (check, accept, diff) and draw it (show); the
query verbs are lineage_query_verbs.py's, the delivery verbs lineage_delivery_verbs.py's."""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

from lineage_assets.lineage_delivery_verbs import (
    add_delivery_verbs,
    dagster_home_instance,
    deliver_before_reading_marquez,
    reads_the_lineage,
    without_lineage,
)
from lineage_assets.lineage_query_verbs import add_query_verbs
from lineage_assets.settings import PROJECT_ROOT, Settings


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
    deliver_before_reading_marquez(args, emitter)
    with dagster_home_instance(settings) as instance:
        in_progress = deployments_in_progress(settings)  # a deployment runs until stopped: its run has no end yet
        in_progress |= {} if instance is None else lineage_runs_in_progress(instance)
        if args.source == "marquez":
            where = f"Marquez at {settings.marquez_api_url}"
            gaps, notes = check_marquez_with_design(MarquezApi.of(settings), settings, emitter.log, in_progress)
        else:
            where = f"the lineage in {emitter.log.segments_dir}"
            gaps = check_log(emitter.log, settings, in_progress) + without_lineage(instance, emitter)
            notes = log_notes(emitter.log, in_progress)
    print(report(gaps, where, notes))
    return 1 if gaps else 0


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
    reads_the_lineage(check, answers_as_json=False)

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

    add_delivery_verbs(verb)

    show = verb("show", _show, "draw the graph as a self-contained HTML page (and PNG)")
    show.add_argument("--out", default="lineage.html", help="the HTML page (default lineage.html)")
    show.add_argument("--png", help="also render the page, column edges shown, to this PNG (needs Chromium)")
    show.add_argument("--events", help="read an exported JSON-lines file instead of the event log")

    add_query_verbs(verb)

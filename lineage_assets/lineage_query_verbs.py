"""The `lineage` verbs that query the recorded lineage and print the answer: impact, trace,
provenance, reached."""

from __future__ import annotations

import argparse
import datetime as dt
import json
from collections.abc import Callable

from lineage_assets.lineage_delivery_verbs import deliver_before_reading_marquez, reads_the_lineage
from lineage_assets.settings import Settings

DATASET_HELP = "a dataset by its asset key (e.g. lakehouse/supplier_stats) or its OpenLineage namespace:name"


def _impact_or_trace(args: argparse.Namespace, settings: Settings) -> int:
    from lineage_assets.lineage.emitter import emitter_for
    from lineage_assets.lineage.marquez import MarquezApi
    from lineage_assets.lineage.queries import ask

    emitter = emitter_for(settings)
    deliver_before_reading_marquez(args, emitter)
    marquez = MarquezApi.of(settings) if args.source == "marquez" else None
    answer = ask(args.action, args.subject, settings, log=emitter.log, marquez=marquez)
    print(json.dumps(answer.as_dict(), indent=2) if args.json else answer.tree(indirect=args.all))
    return 0


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
    deliver_before_reading_marquez(args, emitter)
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


def add_query_verbs(verb: Callable[..., argparse.ArgumentParser]) -> None:
    """These verbs, each with its options, made by ``verb`` (the `lineage` command's)."""
    for name, direction, subject in (
        ("impact", "everything downstream of", "DATASET[.COLUMN]"),
        ("trace", "everything upstream of", "DATASET.COLUMN"),
    ):
        query = verb(name, _impact_or_trace, f"{direction} {subject}", f"{subject}: {DATASET_HELP}.")
        query.add_argument("subject", metavar=subject, help=DATASET_HELP)
        query.add_argument("--all", action="store_true", help="every edge, those only INDIRECT (filters, joins, …) too")
        reads_the_lineage(query)

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
    reads_the_lineage(provenance)

    reached_verb = verb("reached", _reached, "every run, version and partition downstream of the run RUN_ID")
    reached_verb.add_argument("subject", metavar="RUN_ID", help="an OpenLineage run id")
    reached_verb.add_argument(
        "--rematerialize",
        action="store_true",
        help="launch a Dagster backfill of exactly the partitions reached, through the webserver (make dev)",
    )
    reads_the_lineage(reached_verb)

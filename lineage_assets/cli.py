"""The `lineage-assets` command."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from lineage_assets.backfills import BackfillError
from lineage_assets.lineage.marquez import MarquezError
from lineage_assets.settings import PROJECT_ROOT, SECRETS_FILE_VARIABLE, Settings
from lineage_assets.source_schemas import SCHEMA_INCOMPATIBLE
from lineage_assets.stack.services.base import StackError
from lineage_assets.stack.supervisor import Supervisor
from lineage_assets.streaming.exclusive import AlreadyRunning

if TYPE_CHECKING:
    from dagster import DagsterInstance


def _stack(args: argparse.Namespace, settings: Settings) -> int:
    supervisor = Supervisor(settings, progress=lambda line: print(line, flush=True))
    if args.action == "build":
        supervisor.build(args.services)
        return 0
    if args.action in ("image", "compose"):
        from lineage_assets.stack.containers import COMPOSE_FILE, STACK_IMAGE, build_stack_image, compose_text

        if args.action == "image":
            print(f"{STACK_IMAGE} {build_stack_image(settings)[:19]}")
        else:
            COMPOSE_FILE.write_text(compose_text())
            print(f"wrote {COMPOSE_FILE}")
        return 0
    if args.action in ("serve", "check"):
        if len(args.services) != 1:
            raise StackError(f"stack {args.action}: name one service, e.g. `stack {args.action} kafka`")
        if args.action == "serve":
            return supervisor.serve(args.services[0])
        return 0 if supervisor.ready(args.services[0]) else 1
    if args.action == "reload":
        from lineage_assets.code_reload import reload_code

        print(reload_code(supervisor), flush=True)
        return 0
    if args.action == "up":
        supervisor.up(args.services)
        # Deployments that died with the machine end now, with the servers their lineage goes to up.
        from lineage_assets.streaming.deployments import deployments_for

        for name, done in _end_dead(deployments_for(settings), "stack up").items():
            print(f"deployment {name}: {done}", flush=True)
        # Marquez shows the designed graph before anything runs.
        from lineage_assets.assets.design import published_line
        from lineage_assets.definitions import publish_definitions

        print(published_line(publish_definitions(settings)), flush=True)
        # Events a sender that was killed (or went down with the machine) left waiting go now, not at
        # the next event some run emits.
        from lineage_assets.lineage.emitter import emitter_for

        emitter = emitter_for(settings)
        if waiting := emitter.pending():
            emitter.send_pending()
            print(f"lineage: a sender delivers the {waiting} events waiting in {emitter.log.segments_dir}", flush=True)
    elif args.action == "down":
        supervisor.down(args.services)
        return 0
    statuses = supervisor.status(args.services)
    if getattr(args, "json", False):
        print(json.dumps([status.as_dict() for status in statuses], indent=2))
    else:
        for status in statuses:
            state = "healthy" if status.healthy else ("UNHEALTHY" if status.running else "stopped")
            print(f"{status.name:<12} {state:<9} {status.address:<40} pid={status.pid or '-'}  log={status.log}")
    return 0 if all(status.healthy for status in statuses) else 1


def _settings(args: argparse.Namespace, settings: Settings) -> int:
    print(f"  {'variable':<40} {'default':<28} {'in effect':<28} meaning")
    for variable, default, value, meaning in settings.in_effect():
        print(f"{'*' if value != default else ' '} {variable:<40} {default:<28} {value:<28} {meaning}")
    print(f"* differs from the default (set in the environment, or a secret in {SECRETS_FILE_VARIABLE})")
    return 0


def _demo(args: argparse.Namespace, settings: Settings) -> int:
    from lineage_assets.demo import main_demo, main_drift

    seed = args.seed if args.seed is not None else time.time_ns() % 1_000_000
    if args.drift:
        return main_drift(settings, seed=seed)
    print(f"demo: {args.orders} orders, seed {seed}")
    return main_demo(settings, orders=args.orders, seed=seed, continuous=args.continuous)


def _dev(args: argparse.Namespace, settings: Settings) -> int:
    """`dagster dev` on the project's workspace and instance (``instance.py``); with the container
    profile, the project's image rebuilt first, so the runs' containers run the checkout's code."""
    import os

    from lineage_assets.instance import dagster_environment, prepare_dagster_home
    from lineage_assets.settings import PROJECT_ROOT

    if settings.dagster == "services":
        print(
            f"lineage-assets: LINEAGE_ASSETS_DAGSTER=services: the stack runs Dagster (its UI: "
            f"{settings.dagster_url}); `dagster dev` is for LINEAGE_ASSETS_DAGSTER=dev",
            file=sys.stderr,
        )
        return 2
    home = prepare_dagster_home(settings)
    if settings.run_launcher == "docker":
        from lineage_assets.stack.services.engine import build_project_image

        print(f"run launcher: docker, image {settings.docker_image} {build_project_image(settings)[:19]}")
    print(f"Dagster UI: {settings.dagster_url}\nMarquez UI: {settings.marquez_web_url}", flush=True)
    dagster = str(Path(sys.executable).with_name("dagster"))
    os.chdir(PROJECT_ROOT)
    command = [dagster, "dev", "-w", "workspace.yaml", "-h", settings.host, "-p", str(settings.dagster_port)]
    os.execve(dagster, command, dagster_environment(settings, home))


def _design_time(args: argparse.Namespace, settings: Settings) -> int:
    """``lineage check --design`` and ``lineage accept``: the jobs' plans on empty inputs, in a local session."""
    from lineage_assets.datasets import DESIGNED_LINEAGE
    from lineage_assets.lineage import design_time
    from lineage_assets.lineage.observed import ObservationError
    from lineage_assets.spark_conf import in_process_session

    keys = [args.subject] if args.subject else None
    if args.subject and args.subject not in design_time.DESIGNS:
        known = ", ".join(design_time.DESIGNS)
        print(f"lineage-assets: {args.subject!r} is no dataset a Spark job writes: one of {known}", file=sys.stderr)
        return 2
    spark = in_process_session(settings, {"spark.master": "local[1]", "spark.ui.enabled": "false"})
    if args.action == "diff":
        return _design_diff(args, spark, settings)
    if args.action == "accept":
        try:
            changed = design_time.accept(spark, settings, keys)
        except ObservationError as error:
            print(f"lineage accept: nothing written: {error}", file=sys.stderr)
            return 1
        where = DESIGNED_LINEAGE.relative_to(PROJECT_ROOT)
        print(
            f"lineage accept: {', '.join(changed)} changed in {where}"
            if changed
            else f"lineage accept: {where} unchanged"
        )
        return 0
    gaps = design_time.design_gaps(spark, settings, keys)
    if not gaps:
        print("lineage check --design: the jobs' plans make the designed lineage")
        return 0
    print(f"lineage check --design: {len(gaps)} differences between the jobs' plans and the designed lineage:")
    for gap in gaps:
        print(f"  - {gap}")
    print("  (`lineage-assets lineage accept` makes the plans the designed lineage, for review)")
    return 1


def _design_diff(args: argparse.Namespace, spark, settings: Settings) -> int:
    """``lineage diff``: the changes, as text or (``--json``) for a pull request; exit 1 when a plan cannot be made."""
    from lineage_assets.lineage import design_time

    try:
        changes, failures = design_time.diff(spark, settings, args.base)
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


def _lineage(args: argparse.Namespace, settings: Settings) -> int:
    from lineage_assets.lineage.check import (
        check_log,
        check_marquez_with_design,
        log_design,
        log_notes,
        report,
        retire,
    )
    from lineage_assets.lineage.emitter import emitter_for
    from lineage_assets.lineage.marquez import MarquezApi

    if args.subject and args.action not in ("impact", "trace", "provenance", "reached", "accept"):
        print(f"lineage-assets: lineage {args.action} takes no subject, got {args.subject!r}", file=sys.stderr)
        return 2
    if args.action in ("accept", "diff") or (args.action == "check" and args.design):
        return _design_time(args, settings)
    emitter = emitter_for(settings)
    if args.action == "publish":
        from lineage_assets.assets.design import published_line
        from lineage_assets.definitions import publish_definitions

        published = publish_definitions(settings, force=args.force)
        for subject in published.sent:
            print(f"published {subject}")
        for subject in published.retired:
            print(f"retired {subject}")
        print(published_line(published))
        return 0
    if args.action == "show":
        args.out = args.out or "lineage.html"
        return _show(args, settings, emitter)
    if args.action == "export":
        args.out = args.out or "lineage-events.jsonl"
        recorded = emitter.recorded()
        with open(args.out, "w") as out:
            for event in recorded:
                out.write(json.dumps(event) + "\n")
        print(f"wrote {len(recorded)} events to {args.out}")
        return 0
    if args.action == "flush":
        delivered = emitter.flush(timeout=args.timeout)
        left = "all events delivered" if delivered else f"{emitter.pending()} events still wait"
        print(f"{left} ({emitter.log.segments_dir})")
        return 0 if delivered else 1
    if args.action == "status":
        return _delivery_status(settings, emitter)
    if args.action == "dead-letters":
        return _dead_letters(args, emitter)
    if args.action == "retire":
        hidden = retire(MarquezApi.of(settings), settings, log_design(emitter.log))
        print(
            f"hid in Marquez the jobs renamed or retired since: {', '.join(hidden)}"
            if hidden
            else "no renamed or retired job shown in Marquez"
        )
        return 0
    if args.source == "marquez":
        # What the log holds but Marquez has not received yet would read as gaps: deliver it first.
        if emitter.pending() and not emitter.flush(timeout=args.timeout):
            print(
                f"lineage {args.action}: {emitter.pending()} events still wait for Marquez; it reads what Marquez has"
            )
    if args.action in ("provenance", "reached"):
        return _provenance(args, settings, emitter)
    if args.action in ("impact", "trace"):
        from lineage_assets.lineage.queries import ask

        marquez = MarquezApi.of(settings) if args.source == "marquez" else None
        answer = ask(args.action, args.subject, settings, log=emitter.log, marquez=marquez)
        print(json.dumps(answer.as_dict(), indent=2) if args.json else answer.tree(indirect=args.all))
        return 0
    from lineage_assets.assets.in_progress import lineage_runs_in_progress
    from lineage_assets.streaming.deployments import deployments_in_progress

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


def _provenance(args: argparse.Namespace, settings: Settings, emitter) -> int:
    """``provenance`` of a dataset's version, or what a run ``reached``, from the event log or Marquez."""
    from lineage_assets.lineage.marquez import MarquezApi
    from lineage_assets.lineage.provenance import Provenance, Reached, marquez_runs, provenance, reached
    from lineage_assets.lineage.queries import resolve
    from lineage_assets.lineage.summary import runs as summary_runs

    if args.source == "marquez":
        runs = marquez_runs(MarquezApi.of(settings), settings)
    else:
        runs = summary_runs(emitter.log).records()
    answer: Reached | Provenance
    if args.action == "reached":
        answer = reached(runs, args.subject, settings)
        if args.rematerialize:
            from lineage_assets.backfills import launch_backfills

            print(answer.tree())
            title = f"rebuild what run {args.subject} reached"
            for key, backfill in launch_backfills(settings.dagster_url, answer.partitions(), title).items():
                days = ", ".join(answer.partitions()[key])
                print(f"backfill {backfill}: {key} {days} ({settings.dagster_url}/runs/b/{backfill})")
            return 0
    else:
        dataset = resolve(args.subject, settings).dataset
        answer = provenance(runs, dataset, settings, partition=args.partition, version=args.version, at=args.at)
    print(json.dumps(answer.as_dict(), indent=2) if args.json else answer.tree())
    return 0


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


def _dead_letters(args: argparse.Namespace, emitter) -> int:
    """List the dead letters; ``--retry`` sends them again, ``--discard`` drops them once read."""
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


def _show(args: argparse.Namespace, settings: Settings, emitter) -> int:
    from pathlib import Path

    from lineage_assets.datasets import DATASETS
    from lineage_assets.lineage.graph import LineageGraph
    from lineage_assets.lineage.page import render
    from lineage_assets.lineage.summary import summary

    source = Path(args.events) if args.events else emitter.log.segments_dir
    # As the user would name it from here: a page (or a picture of it) carries no path of the machine.
    here = Path.cwd().resolve()
    shown = source.resolve().relative_to(here) if source.resolve().is_relative_to(here) else source
    if args.events:
        with source.open() as lines:
            recorded = [json.loads(line) for line in lines if line.strip()]
        graph, count = LineageGraph.from_events(recorded), len(recorded)
    else:
        known = summary(emitter.log)
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


def _dlq(args: argparse.Namespace, settings: Settings) -> int:
    from lineage_assets import datasets
    from lineage_assets.dead_letters import TEACH_THEN_REPLAY, ReplayError, replay

    # With --json, stdout is the report alone; progress goes to stderr.
    out = sys.stderr if args.json else sys.stdout
    try:
        report = replay(
            settings,
            datasets.orders_reader_schema_json(),
            reason=args.reason,
            progress=lambda line: print(line, file=out, flush=True),
        )
    except ReplayError as error:
        print(f"lineage-assets: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(dataclasses.asdict(report), indent=2))
    else:
        by_version = ", ".join(f"{count} of version {version}" for version, count in sorted(report.versions.items()))
        print(
            f"replayed {report.replayed} dead letters into {settings.orders_topic}"
            + (f": {by_version}" if by_version else "")
        )
        print(f"already replayed by an interrupted earlier run: {report.already_replayed}")
        for prefix, count in sorted(report.passed_over.items()):
            print(f"passed over, left in {settings.dead_letter_topic}: {count} {prefix}")
        if report.stopped_at:
            print(f"stopped at {report.stopped_at}")
        if report.stopped_version:
            print(f"{report.stopped_version}: {TEACH_THEN_REPLAY} again")
        if not report.stopped_at:
            print(f"reached the end of {settings.dead_letter_topic}")
    return 1 if report.stopped_at else 0


def _deployments(args: argparse.Namespace, settings: Settings) -> int:
    from lineage_assets.job_specs import STREAMING_JOBS
    from lineage_assets.streaming.deployments import DeploymentError, deployments_for

    deployments = deployments_for(settings, running_interval=args.running_interval)
    names = args.names or list(STREAMING_JOBS)
    try:
        for name in names:
            if args.command == "deploy":
                print(f"{name:<22} {deployments.deploy(name)}", flush=True)
            elif args.command == "stop":
                print(f"{name:<22} {deployments.stop(name, drain=args.drain)}", flush=True)
    except DeploymentError as error:
        print(f"lineage-assets: {error}", file=sys.stderr)
        return 2
    if args.command == "status":
        ended_now = _end_dead(deployments, "status", names)
        statuses = [deployments.status(name) for name in names]
        if args.json:
            print(
                json.dumps(
                    [{**status.as_dict(), "ended_now": ended_now.get(status.name)} for status in statuses], indent=2
                )
            )
        for status in statuses if not args.json else []:
            if status.name in ended_now:
                print(f"{status.name:<22} {ended_now[status.name]}")
            print(_status_line(status))
    return 0


def _end_dead(deployments, by: str, names: list[str] | None = None) -> dict[str, str]:
    """End the deployments found dead (no other process may be watching them); what was done, by name."""
    from lineage_assets.job_specs import STREAMING_JOBS
    from lineage_assets.streaming.deployments import describe_ending

    done = {name: deployments.end_if_dead(name, by=by) for name in names or STREAMING_JOBS}
    return {name: describe_ending(what) for name, what in done.items() if what}


def _rate(rows_per_second: float | None) -> str:
    """A deployment's rate as `status` shows it: one decimal, or "-" before its first batch."""
    return "-" if rows_per_second is None else f"{rows_per_second:.1f}"


def _status_line(status) -> str:
    progress = status.last_progress or {}
    line = f"{status.name:<22} {status.state:<12} run={status.run_id or '-'}"
    if status.running:
        line += (
            f" pid={status.pid} rows/s={_rate(progress.get('processed_rows_per_second'))}"
            f" last batch={progress.get('time', '-')}"
        )
    if status.orphan_pids:
        line += f" orphan pids={','.join(map(str, status.orphan_pids))}"
    if status.ended and not status.running:
        line += f" at={status.ended['at']} by={status.ended.get('by', '-')}"
        if status.ended.get("reason"):
            line += f"\n{'':<22} reason: {status.ended['reason']}"
    return line


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lineage-assets", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    stack = commands.add_parser("stack", help="build, start, stop or check the local stack of servers")
    stack.add_argument(
        "action",
        choices=["build", "up", "down", "status", "reload", "image", "compose", "serve", "check"],
        help="build: what the servers run, into the cache (`make setup` does it); up, down, status; "
        "image: build the image of the stack as containers (infra/compose.yaml) from those builds; "
        "compose: write infra/compose.yaml from the services; "
        "serve: one service in the foreground (a container's main process); "
        "check: whether a served service is ready (its health check); "
        "reload: Dagster's code server (dagster=services) started again on the code and settings as they are now",
    )
    stack.add_argument("services", nargs="*", help="only these services (default: all)")
    stack.add_argument("--json", action="store_true", help="status as JSON, for scripts")
    stack.set_defaults(handler=_stack)

    demo = commands.add_parser("demo", help="start the stack and materialize every asset on generated orders")
    demo.add_argument("--orders", type=int, default=500, help="how many orders to generate (default 500)")
    demo.add_argument(
        "--seed",
        type=int,
        default=None,
        help="generator seed (default: from the clock, so that repeated demos add new order ids)",
    )
    demo.add_argument(
        "--continuous", action="store_true", help="then deploy the three streaming jobs in continuous mode"
    )
    demo.add_argument(
        "--drift",
        action="store_true",
        help="instead, be another team's producer: a version of orders-value that renames supplier, "
        "20 orders with it among 30 as before; the pipeline must stop them",
    )
    demo.set_defaults(handler=_demo)

    dev = commands.add_parser(
        "dev", help="`dagster dev` on the project's instance (LINEAGE_ASSETS_RUN_LAUNCHER=docker: runs in containers)"
    )
    dev.set_defaults(handler=_dev)

    lineage = commands.add_parser("lineage", help="check, export or deliver the OpenLineage events")
    lineage.add_argument(
        "action",
        choices=[
            "check",
            "publish",
            "export",
            "flush",
            "status",
            "dead-letters",
            "show",
            "impact",
            "trace",
            "provenance",
            "reached",
            "retire",
            "accept",
            "diff",
        ],
        help="check: compare with the asset graph (--design: the jobs' plans, without running them, with the "
        "designed lineage); accept: write the jobs' derivations at design time (of DATASET, default all) into "
        "the designed lineage, for review; diff: what the working tree's jobs change in the designed lineage as "
        "checked in at --base (default HEAD), and what each change reaches downstream; publish: send the designed "
        "graph (a static event per "
        "dataset and job) where it changed since the last publish; export: write every event as JSON lines; "
        "flush: deliver waiting events to the configured backend; "
        "status: what waits for delivery, what was set aside, the last error; "
        "dead-letters: list the events delivery set aside (unreadable, or refused by the backend); "
        "show: draw the graph as a self-contained HTML page (and PNG); "
        "impact: everything downstream of SUBJECT; trace: everything upstream of SUBJECT; "
        "provenance: the runs and versions that made one version of the dataset SUBJECT, down to the "
        "offsets of the source topic; reached: every run, version and partition downstream of the run SUBJECT; "
        "retire: hide in Marquez the jobs renamed or no longer defined (their runs stay)",
    )
    lineage.add_argument(
        "subject",
        nargs="?",
        default="",
        help="impact: DATASET[.COLUMN]; trace: DATASET.COLUMN; provenance, accept: DATASET; reached: RUN_ID "
        "(a dataset by its asset key, e.g. lakehouse/supplier_stats, or its OpenLineage namespace:name)",
    )
    lineage.add_argument("--json", action="store_true", help="impact, trace, provenance, reached: the answer as JSON")
    lineage.add_argument(
        "--all", action="store_true", help="impact, trace: every edge, those only INDIRECT (filters, joins, …) too"
    )
    lineage.add_argument("--base", default="HEAD", help="diff: the git revision to compare with (default HEAD)")
    lineage.add_argument(
        "--design",
        action="store_true",
        help="check: each Spark job's plan on empty inputs held against the designed lineage (no stack needed)",
    )
    version = lineage.add_mutually_exclusive_group()
    version.add_argument("--partition", help="provenance: the version of this partition (a day, YYYY-MM-DD)")
    version.add_argument("--version", help="provenance: this version (e.g. a table's snapshot id)")
    version.add_argument(
        "--at", type=_utc_time, help="provenance: the version as of this time (ISO 8601, UTC unless it says)"
    )
    lineage.add_argument(
        "--out",
        help="export: the output file (default lineage-events.jsonl); show: the HTML page (default lineage.html)",
    )
    lineage.add_argument("--png", help="show: also render the page, column edges shown, to this PNG (needs Chromium)")
    lineage.add_argument("--events", help="show: read an exported JSON-lines file instead of the event log")
    lineage.add_argument("--timeout", type=float, default=30.0, help="flush: how long to keep trying")
    lineage.add_argument("--force", action="store_true", help="publish: send every event of the design, changed or not")
    lineage.add_argument(
        "--rematerialize",
        action="store_true",
        help="reached: launch a Dagster backfill of exactly the partitions reached, through the webserver (make dev)",
    )
    dead = lineage.add_mutually_exclusive_group()
    dead.add_argument("--retry", action="store_true", help="dead-letters: send them again (those refused again stay)")
    dead.add_argument("--discard", action="store_true", help="dead-letters: drop them (after reading them)")
    lineage.add_argument(
        "--source",
        choices=["log", "marquez"],
        default="log",
        help="check, impact, trace, provenance, reached: the project's event log (default) or what Marquez's API shows",
    )
    lineage.set_defaults(handler=_lineage)

    dlq = commands.add_parser("dlq", help="replay dead letters into the source topic, each exactly once")
    dlq.add_argument(
        "action",
        choices=["replay"],
        help="replay: re-publish the dead letters of REASON whose schema version the pipeline now reads; "
        "stops at the first it still cannot read (exit 1)",
    )
    dlq.add_argument(
        "--reason",
        default=SCHEMA_INCOMPATIBLE,
        help=f"replay the dead letters whose reason starts with this (default {SCHEMA_INCOMPATIBLE}); "
        "others are passed over and stay in the dead-letter topic",
    )
    dlq.add_argument("--json", action="store_true", help="the report as JSON")
    dlq.set_defaults(handler=_dlq)

    for name, text in (
        ("deploy", "start streaming jobs in continuous mode (idempotent; a changed config restarts)"),
        ("stop", "stop streaming deployments (ABORT; --drain finishes what is available: COMPLETE)"),
        ("status", "show streaming deployments"),
    ):
        command = commands.add_parser(name, help=text)
        command.add_argument("names", nargs="*", help="asset keys (default: all streaming assets)")
        command.add_argument("--drain", action="store_true", help="stop: process what is available first")
        command.add_argument("--running-interval", type=int, default=10, help="seconds between RUNNING events")
        command.add_argument("--json", action="store_true", help="status as JSON")
        command.set_defaults(handler=_deployments)

    settings = commands.add_parser("settings", help="list every setting, its variable and default")
    settings.set_defaults(handler=_settings)
    return parser


# A process that SIGPIPE ended exits so (128 + 13); Python ignores the signal and raises instead.
EXIT_BROKEN_PIPE = 141


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        result: int = args.handler(args, Settings.from_env().validated())
        sys.stdout.flush()  # here, where a reader gone is caught, not at the interpreter's exit
        return result
    except (StackError, MarquezError, BackfillError, AlreadyRunning, ValueError) as error:
        for line in str(error).splitlines():
            print(f"lineage-assets: {line}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader left (`| head`): what is left to print has nowhere to go, and that is no error
        # to report. Output is pointed at /dev/null, so the flush at exit does not raise it again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())

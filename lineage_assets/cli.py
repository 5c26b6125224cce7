"""The `lineage-assets` command."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

from lineage_assets.backfills import BackfillError
from lineage_assets.lineage.marquez import MarquezError
from lineage_assets.lineage_command import add_lineage_command
from lineage_assets.settings import PROJECT_ROOT, SECRETS_FILE_VARIABLE, Settings
from lineage_assets.settings_environment import in_effect, settings_from_env
from lineage_assets.settings_validation import validated
from lineage_assets.source_schemas import SCHEMA_INCOMPATIBLE
from lineage_assets.stack.services.base import StackError
from lineage_assets.stack_commands import add_stack_commands
from lineage_assets.streaming.exclusive import AlreadyRunning


def _settings(args: argparse.Namespace, settings: Settings) -> int:
    print(f"  {'variable':<40} {'default':<28} {'in effect':<28} meaning")
    for variable, default, value, meaning in in_effect(settings):
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
    from lineage_assets.instance import dagster_environment, prepare_dagster_home

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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lineage-assets", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    add_stack_commands(commands)

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

    add_lineage_command(commands)

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

    settings = commands.add_parser("settings", help="list every setting, its variable and default")
    settings.set_defaults(handler=_settings)
    return parser


# A process that SIGPIPE ended exits so (128 + 13); Python ignores the signal and raises instead.
EXIT_BROKEN_PIPE = 141


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        result: int = args.handler(args, validated(settings_from_env()))
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

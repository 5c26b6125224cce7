"""The commands that start and stop what runs: `stack` (the local servers) and `deploy`, `stop` and
`status` (the streaming jobs' continuous deployments)."""

from __future__ import annotations

import argparse
import json
import sys

from lineage_assets.settings import Settings
from lineage_assets.stack.services.base import StackError
from lineage_assets.stack.supervisor import Supervisor


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


def add_stack_commands(commands: argparse._SubParsersAction) -> None:
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

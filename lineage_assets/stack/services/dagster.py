"""Dagster as its deployment guides run it, opt-in (``dagster=services``): a code-location server for
the project's definitions, the webserver on a workspace that points at it, and the daemon (sensors,
schedules, backfills, run monitoring, the run queue), all on the project's instance, whose storage is
in the stack's PostgreSQL (``lineage_assets/instance.py``). `make dev` (``dagster dev``) stays the
development loop; these are what a team runs for good.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from lineage_assets.instance import dagster_environment, dagster_home, open_instance, prepare_dagster_home
from lineage_assets.private_files import write_private
from lineage_assets.processes import command_line, pids_naming
from lineage_assets.settings import PROJECT_ROOT, Settings
from lineage_assets.stack.probes import http_ok, port_open
from lineage_assets.stack.services.base import Service

# The name `dagster dev` gives the module's location: a sensor or schedule switched on in one stays on in the other.
LOCATION = "lineage_assets.definitions"
DAEMON_HEARTBEAT_S = 60


def _wanted(settings: Settings) -> bool:
    return settings.dagster == "services"


def _program(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def _as_shown(command: list[str]) -> list[str]:
    """A console script's command line as its process shows it: after the interpreter its first line names."""
    first = Path(command[0]).read_text().split("\n", 1)[0]
    return [first.removeprefix("#!").strip(), *command] if first.startswith("#!") else command


def services_workspace(settings: Settings) -> Path:
    """The workspace of the webserver and the daemon: the code-location server, by address."""
    return settings.state_dir / "dagster-services" / "workspace.yaml"


def _working_folder(settings: Settings, name: str) -> None:
    (settings.state_dir / name).mkdir(parents=True, exist_ok=True)  # ``Service.data_dir``: where it runs


def _prepare(settings: Settings) -> None:
    """The instance (its database migrated) and the workspace, written before the first of the three starts."""
    _working_folder(settings, "dagster-code")
    prepare_dagster_home(settings)
    location = {"host": settings.host, "port": settings.dagster_code_port, "location_name": LOCATION}
    write_private(services_workspace(settings), yaml.safe_dump({"load_from": [{"grpc_server": location}]}))


def _environment(settings: Settings) -> dict[str, str]:
    return dagster_environment(settings, dagster_home(settings))


def _daemon_healthy(settings: Settings) -> bool:
    """A daemon runs on the stack's workspace and each of its daemons has beaten within two of their
    30 s heartbeats, as the instance records them (what `dagster-daemon liveness-check` asks, without
    a process per probe). The process is looked for too: a daemon killed a moment ago leaves fresh
    heartbeats, and it has no port to tell it is gone. One in a container of its own (compose's), out
    of this process's sight, has marked itself served in the state folder they share instead; without
    that, a demo in the webserver's container started a second daemon on the instance."""
    here = any(
        any(argument.endswith("dagster-daemon") for argument in command_line(pid) or ())
        for pid in pids_naming(services_workspace(settings))
    )
    if not (here or DAGSTER_DAEMON.served_marker(settings).exists()):
        return False
    try:
        with open_instance(settings, dagster_home(settings)) as instance:
            beats = instance.get_daemon_heartbeats()
    except Exception:  # its database not answering yet
        return False
    return bool(beats) and all(time.time() - beat.timestamp < DAEMON_HEARTBEAT_S for beat in beats.values())


DAGSTER_CODE: Service = Service(
    name="dagster-code",
    ports=lambda s: [s.dagster_code_port],
    command=lambda s: [
        _program("dagster"),
        *("api", "grpc", "--module-name", "lineage_assets.definitions", "--working-directory", str(PROJECT_ROOT)),
        *("--host", s.host, "--port", str(s.dagster_code_port), "--location-name", LOCATION),
    ],
    healthy=lambda s: port_open(s.host, s.dagster_code_port),
    address=lambda s: f"grpc://{s.host}:{s.dagster_code_port}",
    prepare=_prepare,
    requires=("postgres",),
    wanted=_wanted,
    env=_environment,
    retitled=_as_shown,
)


def _beside_the_code_server(
    name: str,
    ports: Callable[[Settings], list[int]],
    command: Callable[[Settings], list[str]],
    healthy: Callable[[Settings], bool],
    address: Callable[[Settings], str],
) -> Service:
    """A Dagster service on the workspace that names the code server: started after it, in a folder of its own."""
    return Service(
        name=name,
        ports=ports,
        command=command,
        healthy=healthy,
        address=address,
        prepare=lambda s: _working_folder(s, name),
        requires=(DAGSTER_CODE.name,),
        wanted=_wanted,
        env=_environment,
        retitled=_as_shown,
    )


DAGSTER_WEBSERVER = _beside_the_code_server(
    "dagster-webserver",
    ports=lambda s: [s.dagster_port],
    command=lambda s: [
        _program("dagster-webserver"),
        *("-w", str(services_workspace(s)), "-h", s.host, "-p", str(s.dagster_port)),
    ],
    healthy=lambda s: http_ok(f"{s.dagster_url}/server_info"),
    address=lambda s: s.dagster_url,
)

DAGSTER_DAEMON = _beside_the_code_server(
    "dagster-daemon",
    ports=lambda s: [],
    command=lambda s: [_program("dagster-daemon"), "run", "-w", str(services_workspace(s))],
    healthy=_daemon_healthy,
    address=lambda s: f"instance {dagster_home(s)}",
)

DAGSTER_SERVICES: tuple[Service, ...] = (DAGSTER_CODE, DAGSTER_WEBSERVER, DAGSTER_DAEMON)

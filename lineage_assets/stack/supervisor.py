"""Starts, checks and stops the local stack's services as plain processes.

Each running service has ``<state>/run/<name>.json`` (its pid and command line) and a log at
``<state>/logs/<name>.log``. ``up`` is idempotent: a service whose recorded process is alive is
left alone. ``down`` signals only processes it recorded, and only while their command line is still
the recorded one (a recycled pid is never signalled).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import IO, Any

from lineage_assets.private_files import private_folder
from lineage_assets.processes import command_line, descendants, listeners, open_files_readable, state, terminate
from lineage_assets.settings import ENV_PREFIX, Settings
from lineage_assets.stack import security
from lineage_assets.stack.services import SERVICES
from lineage_assets.stack.services.base import Service, StackError, as_user


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    address: str
    pid: int | None
    running: bool  # started by this stack, and alive
    # Answers its health probe; when this stack started it, on ports its own process listens on.
    healthy: bool
    log: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _log_end(path: Path) -> int:
    """Where ``path`` ends now: what a service writes to its log from here on is this start's."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _log_since(path: Path, offset: int, lines: int = 15) -> str:
    """The last ``lines`` lines written to ``path`` after ``offset`` (``_log_end``): an earlier run's
    lines would only mislead."""
    try:
        with path.open("rb") as log:
            log.seek(offset)
            written = log.read().decode(errors="replace").splitlines()
    except FileNotFoundError:
        written = []
    return "\n".join(written[-lines:]) or "(nothing written to its log since this start began)"


STOPPED = ("T", "t")  # /proc's states of a process stopped by a signal (SIGSTOP, SIGTSTP) or a tracer


class Supervisor:
    def __init__(
        self,
        settings: Settings,
        services: Iterable[Service] = SERVICES,
        progress: Callable[[str], None] = lambda line: None,
    ):
        self.settings = settings.as_stack()
        self.services = {service.name: service for service in services}
        self.progress = progress

    # --- records of what this supervisor started --------------------------------------------
    def _record_path(self, service: Service) -> Path:
        return self.settings.state_dir / "run" / f"{service.name}.json"

    def _recorded_pid(self, service: Service) -> int | None:
        """The recorded pid if that process is alive and still runs the recorded command."""
        record = self._record_path(service)
        if not record.exists():
            return None
        entry = json.loads(record.read_text())
        shown = command_line(entry["pid"])
        return entry["pid"] if shown in (entry["command"], service.retitled(entry["command"])) else None

    # --- queries --------------------------------------------------------------------------------
    def selected(self, names: Iterable[str] | None = None, only_wanted: bool = True) -> list[Service]:
        """The named services; with no names, those the settings want (every one for ``only_wanted=False``)."""
        if not names:
            return [s for s in self.services.values() if s.wanted(self.settings) or not only_wanted]
        unknown = [name for name in names if name not in self.services]
        if unknown:
            raise StackError(f"unknown service {', '.join(unknown)}; known: {', '.join(self.services)}")
        return [self.services[name] for name in names]

    def status(self, names: Iterable[str] | None = None) -> list[ServiceStatus]:
        statuses = []
        for service in self.selected(names):
            pid = self._recorded_pid(service)
            statuses.append(
                ServiceStatus(
                    name=service.name,
                    address=service.address(self.settings),
                    pid=pid,
                    running=pid is not None,
                    healthy=self._healthy(service, pid),
                    log=str(service.log_file(self.settings)),
                )
            )
        return statuses

    def _healthy(self, service: Service, pid: int | None) -> bool:
        """Whether the service answers its probe and, when ``pid`` (the process this stack started) is
        given, listens on each of its ports itself: a port held by another process answers for it
        otherwise (a server that failed to bind it and exited, or still starts)."""
        if pid is not None and not self._listens(service, pid):
            return False
        return service.healthy(self.settings)

    def _listens(self, service: Service, pid: int) -> bool:
        """Whether ``pid`` or a process below it listens on each of the service's ports; where this
        process may not read their open files (PostgreSQL run as its own user in a container), its
        probe alone decides."""
        tree = descendants({pid})
        held = {port for (_, port), _ in listeners(tree).items()}
        return set(service.ports(self.settings)) <= held or not all(open_files_readable(p) for p in tree)

    # --- build ----------------------------------------------------------------------------------
    def build(self, names: Iterable[str] | None = None) -> None:
        """Builds what the services run into the cache; quick and offline once it is up to date."""
        for service in self.selected(names):
            if not self._skipped_as_replaced(service, "built"):
                service.build(self.settings, self.progress)

    def _skipped_as_replaced(self, service: Service, what: str) -> bool:
        if replaced := service.replaced(self.settings):
            setting = ", ".join(f"LINEAGE_ASSETS_{name.upper()}" for name in replaced)
            self.progress(f"{service.name:<12} not {what}: {setting} points elsewhere")
        return bool(replaced)

    # --- up -------------------------------------------------------------------------------------
    def up(self, names: Iterable[str] | None = None) -> list[ServiceStatus]:
        private_folder(self.settings.state_dir)  # logs, data and configurations with credentials
        wanted = [
            service
            for service in self._with_requirements(self.selected(names))
            if not self._skipped_as_replaced(service, "started")
        ]
        # A requirement run elsewhere counts as healthy: the stack neither starts nor waits for it.
        healthy = {service.name for service in self.services.values() if service.replaced(self.settings)}
        pending = list(wanted)
        while pending:
            # Start every service whose requirements are healthy, then wait for that wave.
            wave = [service for service in pending if set(service.requires) <= healthy]
            if not wave:
                raise StackError(f"cannot order services {[s.name for s in pending]}: circular requirements")
            # Each log's end before its service starts (or is found running): what it writes next is this start's.
            log_ends = {service.name: _log_end(service.log_file(self.settings)) for service in wave}
            launched = {service.name: (self._start(service), time.monotonic()) for service in wave}
            for service in wave:
                self._await_healthy(service, *launched[service.name], log_ends[service.name])
                healthy.add(service.name)
                pending.remove(service)
        return self.status([s.name for s in wanted]) if wanted else []

    def _with_requirements(self, services: list[Service]) -> list[Service]:
        ordered: list[Service] = []

        def visit(service: Service) -> None:
            # What a service run elsewhere requires is that deployment's business.
            for requirement in () if service.replaced(self.settings) else service.requires:
                visit(self.services[requirement])
            if service not in ordered:
                ordered.append(service)

        for service in services:
            visit(service)
        return ordered

    def _start(self, service: Service) -> subprocess.Popen[bytes] | None:
        settings = self.settings
        if self._recorded_pid(service) is not None:
            self.progress(f"{service.name:<12} already running at {service.address(settings)}")
            return None
        _refuse_ephemeral_ports(service, settings)
        taken = [port for port in service.ports(settings) if _port_taken(settings.host, port)]
        if (taken or not service.ports(settings)) and service.healthy(settings):
            # The same service run by someone else (infra/compose.yaml, a developer's own server, the
            # machine's one Docker engine started by another stack): use it.
            self.progress(
                f"{service.name:<12} already served at {service.address(settings)} by a process outside "
                f"this stack; using it (it is not stopped by `stack down`)"
            )
            return None
        if taken:
            raise StackError(
                f"{service.name}: port {taken[0]} on {settings.host} is already in use by another process; "
                f"stop it or choose another port (see `lineage-assets settings`); log: {service.log_file(settings)}"
            )
        log_path = service.log_file(settings)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        command = self._prepared_command(service)
        self.progress(f"{service.name:<12} starting at {service.address(settings)}")
        with log_path.open("ab") as log:
            log.write(f"\n=== {time.strftime('%Y-%m-%dT%H:%M:%S')} {' '.join(command)}\n".encode())
            log.flush()
            process = self._launch(service, command, stdout=log, start_new_session=True)  # outlives the CLI
        record = self._record_path(service)
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps({"pid": process.pid, "command": command}))
        return process

    def _prepared_command(self, service: Service) -> list[str]:
        try:
            if self.settings.tls:
                security.prepared(self.settings)  # what every service of the profile reads
            service.prepare(self.settings)
            return service.command(self.settings)
        except subprocess.CalledProcessError as error:
            raise StackError(
                f"{service.name}: preparation failed ({' '.join(map(str, error.cmd[:3]))} ...): "
                f"{(error.stderr or '').strip()[-500:]}"
            ) from error

    def _launch(
        self, service: Service, command: list[str], stdout: IO[bytes] | None = None, start_new_session: bool = False
    ) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            command,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **service.env(self.settings)},
            cwd=service.data_dir(self.settings),
            stdout=stdout,
            start_new_session=start_new_session,
            umask=service.umask,
            **as_user(service.run_as()),
        )

    # --- one service in the foreground: a container's main process (infra/compose.yaml) ---------
    def serve(self, name: str) -> int:
        """Run one service in the foreground, prepared and started as ``up`` starts it, its output on
        this process's; once it answers, its after-start work (databases, buckets) is done and
        ``ready`` says so. A SIGTERM or SIGINT stops it as ``down`` would. Its exit code."""
        (service,) = self.selected([name])
        private_folder(self.settings.state_dir)
        ready = service.served_marker(self.settings)
        ready.unlink(missing_ok=True)
        process = self._launch(service, self._prepared_command(service))
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: process.send_signal(service.stop_signal))
        try:
            self._await_healthy(service, process, time.monotonic(), _log_end(service.log_file(self.settings)))
        except StackError as error:
            self.progress(str(error))
            process.send_signal(service.stop_signal)
            process.wait()
            return 1
        ready.touch()
        return process.wait()

    def ready(self, name: str) -> bool:
        """Whether a served service answers and its after-start work is done (the compose health check)."""
        (service,) = self.selected([name])
        return service.served_marker(self.settings).exists() and service.healthy(self.settings)

    def _await_healthy(
        self, service: Service, process: subprocess.Popen[bytes] | None, since: float, log_end: int
    ) -> None:
        """Wait for the service (``process`` started now, else the one recorded) to be healthy within
        its start timeout; StackError saying what its process does, with what it logged after ``log_end``."""
        settings = self.settings
        deadline = since + service.start_timeout
        log = service.log_file(settings)
        while True:
            pid = self._recorded_pid(service) if process is None else process.pid
            if pid is not None and (stopped := self._stopped(pid)) is not None:
                raise StackError(
                    f"{service.name}: its process (pid {stopped}) is stopped (by SIGSTOP or a debugger), so it "
                    f"cannot answer at {service.address(settings)}; `kill -CONT {stopped}` resumes it; "
                    f"log: {log}\n{_log_since(log, log_end)}"
                )
            if self._healthy(service, pid):
                break
            if process is not None and process.poll() is not None:
                self._record_path(service).unlink(missing_ok=True)
                raise StackError(
                    f"{service.name}: exited with code {process.returncode} during start; "
                    f"log: {log}\n{_log_since(log, log_end)}"
                )
            if time.monotonic() > deadline:
                runs = f"its process (pid {pid}) runs but does not answer" if pid is not None else "not healthy"
                raise StackError(
                    f"{service.name}: {runs} at {service.address(settings)} after {service.start_timeout:.0f}s; "
                    f"log: {log}\n{_log_since(log, log_end)}"
                )
            time.sleep(0.5)
        service.after_start(settings)
        if process is not None:
            self.progress(f"{service.name:<12} healthy after {time.monotonic() - since:.1f}s")

    @staticmethod
    def _stopped(pid: int) -> int | None:
        """A process of the service (``pid`` or one below it) that is stopped: it answers nothing until continued."""
        return next((each for each in sorted(descendants({pid})) if state(each) in STOPPED), None)

    # --- down -----------------------------------------------------------------------------------
    def down(self, names: Iterable[str] | None = None, timeout: float = 30.0) -> list[str]:
        stopped = []
        selected = self.selected(names, only_wanted=False)  # whatever this stack started
        # Only the named services (not what they require), dependants before what they depend on.
        # Each wave is stopped at once: the nodes of a Kafka quorum stopped one by one would leave
        # the last waiting for a quorum that is gone.
        pending = [s for s in self._with_requirements(list(self.services.values())) if s in selected]
        while pending:
            wave = [s for s in pending if not any(s.name in other.requires for other in pending)]
            if not wave:
                raise StackError(f"cannot order services {[s.name for s in pending]}: circular requirements")
            signals = {}
            for service in wave:
                if (pid := self._recorded_pid(service)) is not None:
                    self.progress(f"{service.name:<12} stopping (pid {pid})")
                    signals[pid] = service.stop_signal
                    stopped.append(service.name)
            terminate(signals, timeout, signals)
            for service in wave:
                self._record_path(service).unlink(missing_ok=True)
                pending.remove(service)
        return stopped


EPHEMERAL_PORT_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def ephemeral_ports(source: Path = EPHEMERAL_PORT_RANGE) -> range | None:
    """The ports this machine hands out to outgoing connections (Linux; None where it cannot tell)."""
    try:
        low, high = map(int, source.read_text().split())
    except (OSError, ValueError):
        return None
    return range(low, high + 1)


def _refuse_ephemeral_ports(service: Service, settings: Settings) -> None:
    """A server port among the ephemeral ones is free when checked and then, now and again, taken by
    some client's outgoing connection before the server binds it: refused up front instead."""
    ephemeral = ephemeral_ports()
    if ephemeral is None:
        return
    for port in service.ports(settings):
        if port in ephemeral:
            setting = next(
                (
                    ENV_PREFIX + f.name.upper()
                    for f in fields(settings)
                    if f.name.endswith("_port") and getattr(settings, f.name) == port
                ),
                f"derived from {service.name}'s port settings",
            )
            raise StackError(
                f"{service.name}: port {port} ({setting}) lies in this machine's ephemeral port range "
                f"{ephemeral.start}-{ephemeral.stop - 1}, from which outgoing connections take their local ports, "
                f"so the server could not rely on binding it; choose a port below {ephemeral.start} "
                f"(see `lineage-assets settings`)"
            )


def _port_taken(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False

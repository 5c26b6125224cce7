"""What a service of the local stack is (``Service``: how it is built, prepared, started, probed and
stopped) and the helpers every family shares. The supervisor (``stack/supervisor.py``) builds, starts,
checks and stops any of them the same way; a service only says how. Templates live in ``infra/conf``
and are rendered with ``string.Template`` from the settings, so a port is never written down twice.
"""

from __future__ import annotations

import pwd
import shutil
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from lineage_assets.private_files import write_private
from lineage_assets.settings import PROJECT_ROOT, Settings

CONF_DIR = PROJECT_ROOT / "infra" / "conf"


class StackError(RuntimeError):
    """A service could not be built, prepared, started or reached; the message names it and its log."""


Progress = Callable[[str], None]


@dataclass(frozen=True)
class Service:
    name: str
    ports: Callable[[Settings], list[int]]
    command: Callable[[Settings], list[str]]
    healthy: Callable[[Settings], bool]
    address: Callable[[Settings], str]
    # Builds what the service runs into the cache (`stack build`, called by `make setup`); does
    # nothing when that is up to date. Services run from Maven jars need none (the Makefile's `jars`).
    build: Callable[[Settings, Progress], None] = lambda settings, progress: None
    # Once-only preparation (render config, format storage); must be idempotent.
    prepare: Callable[[Settings], None] = lambda settings: None
    # After the first healthy probe: buckets, databases. Idempotent too.
    after_start: Callable[[Settings], None] = lambda settings: None
    requires: tuple[str, ...] = ()
    # Settings that point the project at this service run elsewhere (a real cluster); once all of
    # them are set the stack does not run it.
    replaced_by: tuple[str, ...] = ()
    run_as: Callable[[], str | None] = lambda: None
    # Whether `stack up` with no names starts it: an opt-in service only when the settings ask for it.
    wanted: Callable[[Settings], bool] = lambda settings: True
    stop_signal: int = 15
    start_timeout: float = 90.0
    umask: int = -1  # the files it makes; -1: as its parent's (0o077 for a server whose store holds secrets)
    env: Callable[[Settings], dict[str, str]] = field(default=lambda settings: {})
    # The folder of its jars in the jars cache, named as infra/pom.xml resolves them ("": it runs no jar).
    jars: str = ""
    # The command line its process shows once it runs, given the one it was started with: a server
    # that rewrites its own (nginx) is still known as the process the stack started.
    retitled: Callable[[list[str]], list[str]] = lambda command: command

    def data_dir(self, settings: Settings) -> Path:
        return settings.state_dir / self.name

    def served_marker(self, settings: Settings) -> Path:
        """The file a service run in the foreground (``stack serve``, a container's command) writes once it
        is healthy: in a state folder it shares, its process may be out of sight (another container's)."""
        return self.data_dir(settings) / "ready"

    def log_file(self, settings: Settings) -> Path:
        return settings.logs_dir / f"{self.name}.log"

    def jar_folder(self, settings: Settings) -> Path:
        folder = settings.jars_dir / self.jars
        if not self.jars or not any(folder.glob("*.jar")):
            raise StackError(f"no jars in {folder}: run `make setup` (resolves infra/pom.xml into {settings.jars_dir})")
        return folder

    def jar_classpath(self, settings: Settings) -> str:
        return f"{self.jar_folder(settings)}/*"

    def single_jar(self, settings: Settings) -> str:
        jars = sorted(self.jar_folder(settings).glob("*.jar"))
        if len(jars) != 1:
            raise StackError(f"expected one jar in {self.jar_folder(settings)}, found {len(jars)}: run `make setup`")
        return str(jars[0])

    def replaced(self, settings: Settings) -> list[str]:
        """The settings that point elsewhere for this service (empty: the stack runs it)."""
        if self.replaced_by and all(getattr(settings, name) for name in self.replaced_by):
            return list(self.replaced_by)
        return []


def rendered(template: str, **values: object) -> str:
    """The text of a template of ``infra/conf`` with ``values`` in its placeholders."""
    return string.Template((CONF_DIR / template).read_text()).substitute(values)


def render(template: str, target: Path, **values: object) -> Path:
    """A configuration file from its template, for the server's owner only (some hold credentials)."""
    return write_private(target, rendered(template, **values))


def backend_url(settings: Settings, port: int) -> str:
    """Where a service that the tls profile's proxy fronts on ``port`` answers itself: plain HTTP
    behind the proxy (on ``port`` itself in the plaintext profile)."""
    return f"http://{settings.host}:{settings.behind_proxy(port)}"


class RunAs(TypedDict, total=False):
    """The subprocess arguments that set a child's user and groups."""

    user: int
    group: int
    extra_groups: list[int]


def as_user(user: str | None) -> RunAs:
    """subprocess arguments that run a child as ``user`` with its own group only (none of ours)."""
    if not user:
        return {}
    entry = pwd.getpwnam(user)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


def tool(name: str, install: str) -> str:
    """The program's path, or an error saying how to install it."""
    found = shutil.which(name)
    if not found:
        raise StackError(f"{name} not found on PATH: {install}")
    return found


def java() -> str:
    return tool("java", "the stack needs a Java 17+ runtime (apt-get install openjdk-17-jre-headless)")

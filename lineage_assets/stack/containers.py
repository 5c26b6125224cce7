"""The local stack as containers (``infra/compose.yaml``), running what the process stack runs.

One image (``build_stack_image``) holds every server's build: the project's image, with PostgreSQL
15, a JDK and Node.js, and the cache ``make setup`` filled (each server's jars pinned in
``infra/pom.xml``, Marquez built from source). Each service is a container of it running
``lineage-assets stack serve NAME``: the supervisor prepares and starts the server with the same
configuration and command line as ``stack up`` does, and ``stack check NAME`` is its health check.
The containers share the host network, so the settings' host and ports mean the same inside and
out, and a setting passed to ``docker compose`` reaches every container. The compose file is
written from the services (``compose_file``; ``lineage-assets stack compose`` rewrites it), so it
never says differently from the process stack what runs and what depends on what.
"""

from __future__ import annotations

import dataclasses
import json
import re
import tarfile
import tempfile
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import yaml

from lineage_assets.settings import ENV_PREFIX, PROJECT_ROOT, SECRETS_FILE_VARIABLE, Settings
from lineage_assets.spark_conf import spark_jars
from lineage_assets.stack.services import SERVICES
from lineage_assets.stack.services.base import Service, StackError
from lineage_assets.stack.services.dagster import DAGSTER_SERVICES
from lineage_assets.stack.services.engine import build_image, build_project_image, engine_client
from lineage_assets.stack.services.marquez import marquez_web_dir

if TYPE_CHECKING:
    from docker import DockerClient

STACK_IMAGE = "lineage-assets-stack:latest"
COMPOSE_FILE = PROJECT_ROOT / "infra" / "compose.yaml"
DOCKERFILE = PROJECT_ROOT / "infra" / "stack.Dockerfile"
STATE_IN_CONTAINERS = "/var/lib/lineage-assets"  # the image's LINEAGE_ASSETS_STATE_DIR: the volume
HEALTH_INTERVAL_S = 5
COMPOSE_SECRET = "lineage_assets"  # the host's LINEAGE_ASSETS_SECRETS_FILE, at /run/secrets/<this> inside


def stack_services() -> list[Service]:
    """The services the process stack starts with its default settings (not the cluster profile's,
    nor the engine)."""
    return [service for service in SERVICES if service.wanted(Settings())]


def compose_file() -> dict[str, Any]:
    """``infra/compose.yaml``: one container per service, started once what it requires is healthy."""
    # Every setting but the two folders, which are the image's, and the secret ones: passed through when
    # set where `docker compose` runs (a variable that is not set there is not set in the container
    # either). The secret ones come from the host's secrets file, mounted as a compose secret, since an
    # environment shows in `docker inspect`; without one the file is empty and the defaults hold.
    settings = [
        ENV_PREFIX + field.name.upper()
        for field in dataclasses.fields(Settings)
        if field.name not in ("state_dir", "cache_dir", "secrets_file") and not field.metadata["secret"]
    ]
    settings.append(f"{SECRETS_FILE_VARIABLE}=/run/secrets/{COMPOSE_SECRET}")
    services: dict[str, dict[str, Any]] = {}
    # Dagster's services are opt-in, as in the process stack: `docker compose --profile dagster up`.
    dagster = [ENV_PREFIX + "DAGSTER=services" if name == ENV_PREFIX + "DAGSTER" else name for name in settings]
    for service in [*stack_services(), *DAGSTER_SERVICES]:
        opt_in = service in DAGSTER_SERVICES
        services[service.name] = {
            "image": STACK_IMAGE,
            "command": ["lineage-assets", "stack", "serve", service.name],
            **({"profiles": ["dagster"]} if opt_in else {}),
            "network_mode": "host",
            "environment": dagster if opt_in else settings,
            "volumes": [f"state:{STATE_IN_CONTAINERS}"],
            "secrets": [COMPOSE_SECRET],
            "healthcheck": {
                "test": ["CMD", "lineage-assets", "stack", "check", service.name],
                "interval": f"{HEALTH_INTERVAL_S}s",
                "timeout": "60s",
                "retries": int(service.start_timeout // HEALTH_INTERVAL_S) + 1,
            },
            "stop_grace_period": "30s",
        }
        if service.requires:
            services[service.name]["depends_on"] = {name: {"condition": "service_healthy"} for name in service.requires}
    return {
        "services": services,
        "secrets": {COMPOSE_SECRET: {"file": f"${{{SECRETS_FILE_VARIABLE}:-/dev/null}}"}},
        "volumes": {"state": {}},
    }


def compose_text() -> str:
    header = (
        "# The local stack as containers: written by `lineage-assets stack compose` from the stack's services\n"
        "# (lineage_assets/stack/containers.py); edit those, not this file. Build the image first:\n"
        "#   lineage-assets stack image && docker compose -f infra/compose.yaml up -d\n"
        "# Settings pass from the environment, secret ones only from the file LINEAGE_ASSETS_SECRETS_FILE names.\n"
    )
    return header + yaml.safe_dump(compose_file(), sort_keys=False, width=120)


def _required_modules(web: Path) -> set[str]:
    """The ``node_modules`` folders Marquez's web server loads: the packages its ``setupProxy.js``
    requires and theirs, resolved from ``package-lock.json`` as Node resolves them (the nearest
    ``node_modules`` up the tree). Not the whole folder: most of it builds the UI, which is built."""
    packages = json.loads((web / "package-lock.json").read_text())["packages"]
    server = (web / "setupProxy.js").read_text()
    wanted = re.findall(r"require\(['\"]([^'\"./][^'\"]*)['\"]\)", server)

    def resolve(at: str, name: str) -> str | None:
        while True:
            candidate = f"{at}/node_modules/{name}" if at else f"node_modules/{name}"
            if candidate in packages:
                return candidate
            if not at:
                return None
            at = at.rsplit("/node_modules/", 1)[0] if "/node_modules/" in at else ""

    found, pending = set(), [resolve("", name) for name in wanted]
    while pending:
        path = pending.pop()
        if path is None or path in found:
            continue
        found.add(path)
        entry = packages[path]
        pending.extend(
            resolve(path, name) for name in [*entry.get("dependencies", {}), *entry.get("optionalDependencies", {})]
        )
    missing = [name for name in wanted if resolve("", name) is None]
    if missing:
        raise StackError(f"marquez-web: {', '.join(missing)} not in {web / 'package-lock.json'}: run `make setup`")
    return found


def _outermost(folders: set[str]) -> list[str]:
    """``folders`` without those inside another of them, which adding that one adds already."""
    return sorted(f for f in folders if not any(f.startswith(f"{other}/") for other in folders))


def _stack_context(settings: Settings) -> IO[bytes]:
    """The stack image's build context: its Dockerfile and the servers' and jobs' builds under ``cache/``."""
    context = tempfile.TemporaryFile()
    with tarfile.open(fileobj=context, mode="w") as tar:
        tar.add(DOCKERFILE, arcname="Dockerfile")
        for service in stack_services():
            if service.jars:
                tar.add(service.jar_folder(settings), arcname=f"cache/jars/{service.jars}")
        # The Spark jobs' connectors: the runs Dagster's code server (profile `dagster`) launches run in its container.
        for jar in spark_jars(settings):
            tar.add(jar, arcname=f"cache/jars/spark/{jar.name}")
        web = marquez_web_dir(settings)
        if not (web / "dist" / "index.html").exists():
            raise StackError(f"marquez-web: no built UI in {web}: run `make setup`")
        for part in ("dist", "setupProxy.js", "package.json", *_outermost(_required_modules(web))):
            tar.add(web / part, arcname=f"cache/marquez/web/{part}")
    context.seek(0)
    return context


def build_stack_image(settings: Settings, client: DockerClient | None = None) -> str:
    """The stack's image (``infra/stack.Dockerfile``) on the project's, both built here. Its id."""
    client = client or engine_client(settings)
    build_project_image(settings, client)
    with _stack_context(settings) as context:
        return build_image(client, context, STACK_IMAGE, buildargs={"PROJECT_IMAGE": settings.docker_image})

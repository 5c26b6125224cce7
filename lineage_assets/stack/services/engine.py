"""A Docker engine, opt-in: the docker deployment backend and the container profile run on it.

A machine with an engine of its own (one answers at ``DOCKER_HOST`` or the default socket) uses it
as it is, and so does a ``LINEAGE_ASSETS_DOCKER_HOST`` set elsewhere. Otherwise the stack runs
Debian's ``dockerd`` (``make engine`` installs it), one per machine: its socket and images live in
the cache (its runtime state in ``/run``), so the tests' stack and the default one share it
(whichever started it stops it).
It changes nothing in the machine's network: no bridge, no iptables rules, so every container runs
on the host network and reaches the stack at the settings' host.

Once it answers, the stack builds the project's image (``build_project_image``) on
``debian:bookworm``: pulled where a registry answers, otherwise built from the Debian mirror the
machine already uses (mmdebstrap's minimal variant, imported once and kept as a tarball in the
cache, so a new engine does not build it again).
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

from lineage_assets.connections import security_files
from lineage_assets.private_files import replace_private
from lineage_assets.settings import PROJECT_ROOT, SECRETS_FILE_VARIABLE, Settings
from lineage_assets.settings_environment import as_environment, secrets_file_text
from lineage_assets.spark_conf import class_archive_dir
from lineage_assets.stack.services.base import Service, StackError, tool

if TYPE_CHECKING:
    from docker import DockerClient

BASE_IMAGE = "debian:bookworm"
MACHINE_ENGINE = "unix:///var/run/docker.sock"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
DOCKERFILE = "infra/Dockerfile"
LOCAL_CERTIFICATES = Path("/usr/local/share/ca-certificates")
BUILT_LABEL = "lineage-assets.image"  # on the images the project builds, so it removes only its own


def _engine_dir(settings: Settings) -> Path:
    return settings.cache_dir / "docker"


def _own_socket(settings: Settings) -> Path:
    return _engine_dir(settings) / "docker.sock"


def _exec_root(settings: Settings) -> Path:
    """The engine's runtime state outside the checkout: dockerd leaves its network namespace mounted
    there after it stops, and a mount inside the checkout would keep the folder from being deleted."""
    key = hashlib.sha256(str(_engine_dir(settings).resolve()).encode()).hexdigest()[:12]
    return Path("/run") / f"lineage-assets-docker-{key}"


def _answers(url: str) -> bool:
    import docker

    try:
        client = docker.DockerClient(base_url=url, timeout=5)
        try:
            return client.ping()
        finally:
            client.close()
    except Exception:  # the SDK raises its own, requests' and socket errors for an engine that is not there
        return False


def engine_url(settings: Settings) -> str:
    """Where the project's Docker engine answers: the setting, else the machine's own if it answers,
    else the stack's (``stack up docker``)."""
    if settings.docker_host:
        return settings.docker_host
    machine = os.environ.get("DOCKER_HOST") or MACHINE_ENGINE
    return machine if _answers(machine) else f"unix://{_own_socket(settings)}"


def engine_client(settings: Settings) -> DockerClient:
    """The Docker SDK's client of the project's engine (``engine_url``)."""
    import docker

    return docker.DockerClient(base_url=engine_url(settings), timeout=120)


def uses_engine(settings: Settings) -> bool:
    """Whether anything runs in containers: streaming deployments, or Dagster's runs (the container profile)."""
    return settings.deployment_backend == "docker" or settings.run_launcher == "docker"


def container_options(settings: Settings, *writable: Path) -> dict[str, Any]:
    """How the project's containers run (``containers.run`` arguments): on the host network, so every
    address in the settings means the same inside, with the cache read-only and the state folder (and
    ``writable`` folders outside it) read-write at their host paths. The Spark drivers' class archives
    are writable too: a container's classpath is not the host's, so its drivers write an archive of
    their own there, once, and later containers map it. The files the clients' security reads are
    mounted read-only at their paths."""
    archives = class_archive_dir(settings)
    volumes: dict[str, dict[str, str]] = {
        str(settings.cache_dir): {"bind": str(settings.cache_dir), "mode": "ro"},
        str(archives): {"bind": str(archives), "mode": "rw"},
    }
    for folder in (settings.state_dir, *writable):
        if folder == settings.state_dir or not folder.is_relative_to(settings.state_dir):
            volumes[str(folder)] = {"bind": str(folder), "mode": "rw"}
    for file in security_files(settings):
        if not file.is_relative_to(settings.state_dir):
            volumes[str(file)] = {"bind": str(file), "mode": "ro"}
    return {"network_mode": "host", "volumes": volumes}


CONTAINER_SECRETS = "container-secrets.env"


def container_environment(settings: Settings) -> dict[str, str]:
    """The environment of the project's containers: the settings without their secrets, which they read
    from an owner-only file in the state folder (written here): `docker inspect` shows a container's
    environment to whoever may use the engine."""
    secrets = replace_private(settings.state_dir / CONTAINER_SECRETS, secrets_file_text(settings))
    return {**as_environment(settings, secrets=False), SECRETS_FILE_VARIABLE: str(secrets)}


def _runs_own_engine(settings: Settings) -> bool:
    return engine_url(settings) == f"unix://{_own_socket(settings)}"


def _dockerd_command(settings: Settings) -> list[str]:
    folder = _engine_dir(settings)
    return [
        tool("dockerd", "run `make engine` (installs Debian's docker.io)"),
        f"--host=unix://{_own_socket(settings)}",
        f"--data-root={folder / 'data'}",
        f"--exec-root={_exec_root(settings)}",
        f"--pidfile={folder / 'dockerd.pid'}",
        "--bridge=none",
        "--iptables=false",
        "--ip6tables=false",
        "--ip-masq=false",
        "--userland-proxy=false",
    ]


def _prepare_engine(settings: Settings) -> None:
    ENGINE.data_dir(settings).mkdir(parents=True, exist_ok=True)  # the supervisor runs it from there
    _engine_dir(settings).mkdir(parents=True, exist_ok=True)


def _debian_mirror(sources: Path = Path("/etc/apt")) -> str:
    """The first Debian mirror of the machine's apt sources (deb822 or one-line), else Debian's own."""
    for path in sorted([*sources.glob("sources.list.d/*.sources"), *sources.glob("sources.list*")]):
        if path.is_file():
            for match in re.finditer(r"(?:^URIs:\s*|^deb\s+(?:\[[^]]*\]\s+)?)(\S+)", path.read_text(), re.MULTILINE):
                if match.group(1).rstrip("/").endswith("/debian"):
                    return match.group(1)
    return DEBIAN_MIRROR


def ensure_base_image(settings: Settings, client: DockerClient | None = None) -> str:
    """``debian:bookworm`` in the engine: there already, pulled, or imported from a root filesystem
    built with mmdebstrap (cached as a tarball). The image's name."""
    import docker.errors

    client = client or engine_client(settings)
    try:
        client.images.get(BASE_IMAGE)
        return BASE_IMAGE
    except docker.errors.ImageNotFound:
        pass
    try:
        repository, tag = BASE_IMAGE.split(":")
        client.images.pull(repository, tag)
        return BASE_IMAGE
    except docker.errors.APIError:
        pass  # no registry answers from this machine: build it from Debian's mirror
    tarball = _engine_dir(settings) / "debian-bookworm-minbase.tar"
    if not tarball.exists():
        partial = tarball.with_name(f"partial-{tarball.name}")  # mmdebstrap picks its output format by the suffix
        result = subprocess.run(
            [
                tool("mmdebstrap", "run `make engine` (installs Debian's mmdebstrap)"),
                "--variant=minbase",
                "--include=ca-certificates",
                "bookworm",
                str(partial),
                _debian_mirror(),
            ],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise StackError(f"docker: mmdebstrap could not build {BASE_IMAGE}: {result.stderr[-2000:]}")
        partial.rename(tarball)
    client.api.import_image_from_file(str(tarball), repository="debian", tag="bookworm")
    return BASE_IMAGE


def _build_context(trusted: Path = LOCAL_CERTIFICATES) -> IO[bytes]:
    """The image's build context: the project's files less ``.dockerignore``'s, plus ``trusted-ca/``,
    the certificate authorities this machine trusts beyond Debian's own (a TLS-inspecting proxy's), so
    that pip inside the build reaches PyPI as it does outside. A temporary tar file."""
    from docker.utils.build import create_archive, exclude_paths

    ignored = (PROJECT_ROOT / ".dockerignore").read_text().splitlines()
    patterns = [line.strip() for line in ignored if line.strip() and not line.startswith("#")]
    files = sorted(exclude_paths(str(PROJECT_ROOT), patterns, dockerfile=DOCKERFILE))
    authorities = [(f"trusted-ca/{path.name}", path.read_text()) for path in sorted(trusted.glob("*.crt"))]
    # create_archive's own default file, passed in: given none, its stubs allow any tar file object back.
    archive = tempfile.NamedTemporaryFile()
    extra_files = [("trusted-ca/.kept", ""), *authorities]
    create_archive(root=str(PROJECT_ROOT), files=files, fileobj=archive, extra_files=extra_files)
    return archive


def build_project_image(settings: Settings, client: DockerClient | None = None) -> str:
    """The project's image (``infra/Dockerfile``) tagged ``settings.docker_image``, on the base image.
    Its dependencies are a layer of their own, so with an unchanged ``pyproject.toml`` a rebuild only
    copies the sources again. The image's id."""
    client = client or engine_client(settings)
    ensure_base_image(settings, client)
    with _build_context() as context:
        return build_image(client, context, settings.docker_image, dockerfile=DOCKERFILE)


def build_image(
    client: DockerClient,
    context: IO[bytes],
    tag: str,
    *,
    dockerfile: str | None = None,
    buildargs: dict[str, str] | None = None,
) -> str:
    """An image built from a build context (a tar file) on the host network: no bridge on the
    stack's engine, and apt and pip reach their mirrors directly. The build it replaces is removed
    (it would stay as an untagged image: one per change of the sources). Its id."""
    import docker.errors

    label = {BUILT_LABEL: tag}
    try:
        image, _ = client.images.build(
            fileobj=context,
            custom_context=True,
            tag=tag,
            network_mode="host",
            rm=True,
            labels=label,
            dockerfile=dockerfile,
            buildargs=buildargs,
        )
    except docker.errors.BuildError as error:
        lines = "".join(part.get("stream", "") or part.get("error", "") for part in error.build_log)
        raise StackError(f"docker: building {tag} failed: {error.msg}\n{lines[-2000:]}") from error
    client.images.prune(filters={"dangling": True, "label": f"{BUILT_LABEL}={tag}"})
    if image.id is None:  # the SDK inspects the image it built, whose attributes always hold its id
        raise StackError(f"docker: the engine gave no id for the image it built as {tag}")
    return image.id


class Stack(Protocol):
    """What ``ready_engine`` needs of the stack's supervisor (whose module imports this one)."""

    settings: Settings

    def up(self, names: list[str]) -> object: ...


def ready_engine(supervisor: Stack) -> DockerClient:
    """The project's engine with its image built: ``supervisor``'s stack starts one when the machine
    has none. The engine's client."""
    settings = supervisor.settings
    if _runs_own_engine(settings):
        supervisor.up([ENGINE.name])  # builds the image once the engine answers
    else:
        build_project_image(settings)
    return engine_client(settings)


def _provide_images(settings: Settings) -> None:
    build_project_image(settings)


ENGINE = Service(
    name="docker",
    wanted=lambda s: uses_engine(s) and _runs_own_engine(s),
    replaced_by=("docker_host",),
    ports=lambda s: [],
    command=_dockerd_command,
    healthy=lambda s: _answers(f"unix://{_own_socket(s)}"),
    address=lambda s: f"unix://{_own_socket(s)}",
    prepare=_prepare_engine,
    after_start=_provide_images,
    start_timeout=120.0,  # the first import of the base image
)

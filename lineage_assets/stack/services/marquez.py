"""Marquez, the lineage API and its web UI, built from its release source."""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import tarfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from lineage_assets.settings import MARQUEZ_RELEASE_URL, PROJECT_ROOT, Settings
from lineage_assets.stack.probes import http_ok
from lineage_assets.stack.services.base import (
    CONF_DIR,
    Progress,
    Service,
    StackError,
    backend_url,
    java,
    render,
    tool,
)

# The tag's `git archive`, as GitHub serves it at MARQUEZ_RELEASE_URL (commit 27a4a1357d90 in its pax header).
MARQUEZ_RELEASE_SHA256 = "7987a5888e46d7e9fb8efe32244afb260a4576fab1a3c9d84a3803dd27d631a4"


def _marquez_dir(settings: Settings) -> Path:
    return settings.cache_dir / "marquez"


def marquez_web_dir(settings: Settings) -> Path:
    return _marquez_dir(settings) / "web"


def _up_to_date(stamp: Path, fingerprint: str) -> bool:
    return stamp.exists() and stamp.read_text() == fingerprint


def _run_logged(command: list[str], cwd: Path, log: Path, what: str) -> None:
    with log.open("w") as output:
        result = subprocess.run(command, cwd=cwd, stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        raise StackError(
            f"{what} failed ({' '.join(command[:3])} ... exited with {result.returncode}); log: {log}\n{tail}"
        )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as data:
        for block in iter(lambda: data.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _release_checked(archive: Path, source: str) -> Path:
    actual = _sha256(archive)
    if actual != MARQUEZ_RELEASE_SHA256:
        raise StackError(
            f"LINEAGE_ASSETS_MARQUEZ_SOURCE={source}: the archive's sha256 is {actual}, not {MARQUEZ_RELEASE_SHA256} "
            f"of Marquez 0.51.1's release source ({MARQUEZ_RELEASE_URL}); point the setting at that archive"
        )
    return archive


def _marquez_archive(settings: Settings, progress: Progress) -> Path:
    """The release archive `marquez_source` names, checked against its pinned sha256 and kept in the
    cache: a local copy is checked each time, a URL is downloaded once (any URL finds the cached archive)."""
    source = settings.marquez_source
    archive = _marquez_dir(settings) / "marquez-0.51.1.tar.gz"
    archive.parent.mkdir(parents=True, exist_ok=True)
    if urllib.parse.urlsplit(source).scheme not in ("http", "https"):
        if not Path(source).is_file():
            raise StackError(
                f"Marquez source archive not found: LINEAGE_ASSETS_MARQUEZ_SOURCE={source}; set it to a local copy "
                f"or a mirror's URL of Marquez 0.51.1's release source ({MARQUEZ_RELEASE_URL})"
            )
        _release_checked(Path(source), source)
        if not archive.exists():
            shutil.copyfile(source, archive)
        return archive
    if archive.exists():
        return _release_checked(archive, str(archive))
    progress(f"downloading {source}")
    partial = archive.with_suffix(".part")
    try:
        with urllib.request.urlopen(source, timeout=60) as response, partial.open("wb") as out:
            shutil.copyfileobj(response, out)
        partial.rename(_release_checked(partial, source).with_name(archive.name))
    except (urllib.error.URLError, OSError) as error:
        raise StackError(
            f"cannot download LINEAGE_ASSETS_MARQUEZ_SOURCE={source}: {error}; without access to that host, set it "
            f"to a local copy or a mirror's URL of the same archive"
        ) from None
    finally:
        partial.unlink(missing_ok=True)  # a failed or mismatched download is not kept
    return archive


def _marquez_sources(settings: Settings, progress: Progress) -> tuple[Path, str]:
    """The extracted source tree and the sha256 of the archive it came from."""
    # `make setup` builds the API and the web UI at once: one process fetches and extracts, the other waits.
    lock = _marquez_dir(settings) / "src.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        return _extracted_sources(settings, progress)


def _extracted_sources(settings: Settings, progress: Progress) -> tuple[Path, str]:
    archive = _marquez_archive(settings, progress)
    fingerprint = f"{MARQUEZ_RELEASE_SHA256}\n"
    target = _marquez_dir(settings) / "src"
    stamp = target / ".extracted"
    if not _up_to_date(stamp, fingerprint):
        # Into a sibling first: an interrupted extraction never looks complete.
        partial = target.with_name("src.partial")
        shutil.rmtree(partial, ignore_errors=True)
        with tarfile.open(archive) as tar:
            tar.extractall(partial, filter="data")
        (partial / stamp.name).write_text(fingerprint)
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
    (tree,) = [entry for entry in target.iterdir() if entry.is_dir()]  # marquez-0.51.1/
    return tree, fingerprint


def _build_marquez_api(settings: Settings, progress: Progress) -> None:
    sources, fingerprint = _marquez_sources(settings, progress)
    pom = PROJECT_ROOT / "infra" / "pom.xml"
    fingerprint += hashlib.sha256(pom.read_bytes()).hexdigest()
    jars = settings.jars_dir / "marquez"
    stamp = jars / ".built"
    if _up_to_date(stamp, fingerprint):
        return
    progress("marquez      building the API server with Maven (about 30 s; 1 min with downloads)")
    shutil.rmtree(jars, ignore_errors=True)  # no jar of an older classpath stays behind
    build = _marquez_dir(settings) / "api-build"
    build.mkdir(parents=True, exist_ok=True)
    _run_logged(
        [
            tool("mvn", "install Maven"),
            "-q",
            "-B",
            "-f",
            str(pom),
            f"-Dmaven.repo.local={settings.cache_dir / 'm2'}",
            "package",
            "-P",
            "marquez",
            f"-Djars.dir={settings.jars_dir}",
            f"-Dmarquez.source={sources}",
            f"-Dmarquez.build={build}",
        ],
        cwd=PROJECT_ROOT,
        log=_marquez_dir(settings) / "api-build.log",
        what="marquez: building the API",
    )
    stamp.write_text(fingerprint)


def _build_marquez_web(settings: Settings, progress: Progress) -> None:
    sources, fingerprint = _marquez_sources(settings, progress)
    web = marquez_web_dir(settings)
    stamp = web / ".built"
    if _up_to_date(stamp, fingerprint):
        return
    progress("marquez-web  building the web UI with npm (about 3 min, up to 5 GB of memory)")
    shutil.rmtree(web, ignore_errors=True)
    shutil.copytree(sources / "web", web)
    npm = tool("npm", "install Node.js 18 or later (apt-get install nodejs npm)")
    # npm's own cache under the project's cache, like Maven's repository.
    _run_logged(
        [npm, "ci", "--no-audit", "--no-fund", "--cache", str(settings.cache_dir / "npm")],
        cwd=web,
        log=_marquez_dir(settings) / "web-npm-ci.log",
        what="marquez-web: npm ci",
    )
    _run_logged(
        [npm, "run", "build"], cwd=web, log=_marquez_dir(settings) / "web-build.log", what="marquez-web: npm run build"
    )
    stamp.write_text(fingerprint)


def marquez_command(settings: Settings, command: str, *options: str) -> list[str]:
    """Marquez's ``command`` (``server``; ``db-retention`` and its other tools) with the stack's configuration."""
    configuration = MARQUEZ.data_dir(settings) / "marquez.yml"
    return [
        java(),
        "-Xmx1g",
        "-cp",
        MARQUEZ.jar_classpath(settings),
        "marquez.MarquezApp",
        command,
        *options,
        str(configuration),
    ]


def _prepare_marquez(settings: Settings) -> None:
    data = MARQUEZ.data_dir(settings)
    render(
        "marquez.yml",
        data / "marquez.yml",
        host=settings.host,
        marquez_port=settings.behind_proxy(settings.marquez_port),
        marquez_admin_port=settings.marquez_admin_port,
        jdbc_url=settings.marquez_jdbc_url,
        postgres_user=settings.postgres_user,
        postgres_password=settings.postgres_password,
        db_retention=(
            f"dbRetention:\n  frequencyMins: 60\n  retentionDays: {settings.marquez_retention_days}\n"
            if settings.marquez_retention_days
            else ""
        ),
    )


def _marquez_healthy(settings: Settings) -> bool:
    """Its health check on the admin port, and its API answering on its own port: a server that could
    bind only one of the two exits, and another process may hold the other."""
    return http_ok(f"http://{settings.host}:{settings.marquez_admin_port}/healthcheck") and http_ok(
        f"{backend_url(settings, settings.marquez_port)}/api/v1/namespaces?limit=1"
    )


MARQUEZ = Service(
    name="marquez",
    jars="marquez",
    replaced_by=("marquez_url",),
    ports=lambda s: [s.behind_proxy(s.marquez_port), s.marquez_admin_port],
    command=lambda s: marquez_command(s, "server"),
    healthy=_marquez_healthy,
    address=lambda s: s.marquez_api_url,
    build=_build_marquez_api,
    prepare=_prepare_marquez,
    requires=("postgres",),
    start_timeout=180.0,  # the first start migrates an empty database (about 10 s, much more on a loaded machine)
)


def _marquez_web_command(settings: Settings) -> list[str]:
    server = marquez_web_dir(settings) / "setupProxy.js"
    if not (marquez_web_dir(settings) / "dist" / "index.html").exists():
        raise StackError(
            f"marquez-web: no built UI in {server.parent}: run `make setup` (or `lineage-assets stack build`)"
        )
    return [
        tool("node", "install Node.js 18 or later (apt-get install nodejs)"),
        "--require",
        str(CONF_DIR / "listen-on-host.js"),
        str(server),
    ]


def _marquez_web_env(settings: Settings) -> dict[str, str]:
    """The upstream server's variables; the API's address from marquez_api_url, so a remote Marquez works
    too; the local one's own, behind the tls profile's proxy (the UI sends no API key)."""
    api = urllib.parse.urlsplit(settings.marquez_url or backend_url(settings, settings.marquez_port))
    return {
        "MARQUEZ_HOST": api.hostname or settings.host,
        "MARQUEZ_PORT": str(api.port or 80),
        "WEB_PORT": str(settings.marquez_web_port),
        "LISTEN_HOST": settings.host,
    }


MARQUEZ_WEB: Service = Service(
    name="marquez-web",
    ports=lambda s: [s.marquez_web_port],
    command=_marquez_web_command,
    healthy=lambda s: http_ok(f"{s.marquez_web_url}/healthcheck"),
    address=lambda s: s.marquez_web_url,
    build=_build_marquez_web,
    prepare=lambda s: MARQUEZ_WEB.data_dir(s).mkdir(parents=True, exist_ok=True),
    requires=("marquez",),
    env=_marquez_web_env,
)

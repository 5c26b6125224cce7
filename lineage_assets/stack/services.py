"""What each service of the local stack is: how it is built, its config template, ports and health probe.

The supervisor (``supervisor.py``) builds, starts, checks and stops any of them the same way; a
service here only says how. Templates live in ``infra/conf`` and are rendered with ``string.Template`` from the
settings, so a port is never written down twice.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import pwd
import shutil
import socket
import stat
import string
import subprocess
import sys
import tarfile
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from lineage_assets.private_files import write_private
from lineage_assets.settings import MARQUEZ_RELEASE_URL, PROJECT_ROOT, Settings
from lineage_assets.spark_conf import spark_home

CONF_DIR = PROJECT_ROOT / "infra" / "conf"
POSTGRES_BIN = Path("/usr/lib/postgresql/15/bin")


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
    env: Callable[[Settings], dict[str, str]] = field(default=lambda settings: {})

    def data_dir(self, settings: Settings) -> Path:
        return settings.state_dir / self.name

    def log_file(self, settings: Settings) -> Path:
        return settings.logs_dir / f"{self.name}.log"

    def replaced(self, settings: Settings) -> list[str]:
        """The settings that point elsewhere for this service (empty: the stack runs it)."""
        if self.replaced_by and all(getattr(settings, name) for name in self.replaced_by):
            return list(self.replaced_by)
        return []


def render(template: str, target: Path, **values) -> Path:
    """A configuration file from its template, for the server's owner only (some hold credentials)."""
    return write_private(target, string.Template((CONF_DIR / template).read_text()).substitute(values))


def _tool(name: str, install: str) -> str:
    found = shutil.which(name)
    if not found:
        raise StackError(f"{name} not found on PATH: {install}")
    return found


def java() -> str:
    return _tool("java", "the stack needs a Java 17+ runtime (apt-get install openjdk-17-jre-headless)")


def jar_classpath(settings: Settings, folder: str) -> str:
    jars = settings.jars_dir / folder
    if not jars.is_dir() or not any(jars.glob("*.jar")):
        raise StackError(f"no jars in {jars}: run `make setup` (resolves infra/pom.xml into {settings.jars_dir})")
    return f"{jars}/*"


def single_jar(settings: Settings, folder: str) -> str:
    jars = sorted((settings.jars_dir / folder).glob("*.jar"))
    if len(jars) != 1:
        raise StackError(f"expected one jar in {settings.jars_dir / folder}, found {len(jars)}: run `make setup`")
    return str(jars[0])


def port_open(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def http_ok(url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return 200 <= response.status < 300
    except (urllib.error.URLError, OSError, ValueError):
        return False


# --- PostgreSQL --------------------------------------------------------------------------------


def _postgres_user() -> str | None:
    """PostgreSQL refuses to run as root; under root the Debian package's `postgres` user runs it."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        raise StackError("running as root needs the `postgres` system user (apt-get install postgresql-15)") from None
    return "postgres"


def _postgres_binary(name: str) -> str:
    binary = POSTGRES_BIN / name
    if not binary.exists():
        raise StackError(f"{binary} not found: run `make setup` (installs Debian's postgresql-15)")
    return str(binary)


def as_user(user: str | None) -> dict:
    """subprocess arguments that run a child as ``user`` with its own group only (none of ours)."""
    if not user:
        return {}
    entry = pwd.getpwnam(user)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


def _chown_for(path: Path, user: str | None) -> None:
    if user:
        entry = pwd.getpwnam(user)
        for folder in [path, *path.rglob("*")]:
            os.chown(folder, entry.pw_uid, entry.pw_gid)
        # The server's user must be able to reach its folder: grant search (not listing) on any
        # parent that denies it, as a checkout inside a private temporary folder does.
        for parent in path.parents:
            mode = parent.stat().st_mode
            if not mode & stat.S_IXOTH:
                os.chmod(parent, mode | stat.S_IXOTH)
        if subprocess.run(["test", "-w", str(path)], **as_user(user)).returncode != 0:
            raise StackError(
                f"postgres: user {user} cannot write {path}; give it access or set LINEAGE_ASSETS_STATE_DIR"
            )


def _prepare_postgres(settings: Settings) -> None:
    data = POSTGRES.data_dir(settings)
    user = _postgres_user()
    (data / "socket").mkdir(parents=True, exist_ok=True)
    _chown_for(data, user)
    if (data / "pgdata" / "PG_VERSION").exists():
        return
    subprocess.run(
        [
            _postgres_binary("initdb"),
            "-D",
            str(data / "pgdata"),
            "-U",
            settings.postgres_user,
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-locale",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        **as_user(user),
    )


def _psql(settings: Settings, sql: str, database: str = "postgres") -> str:
    result = subprocess.run(
        [
            _postgres_binary("psql"),
            "-h",
            settings.host,
            "-p",
            str(settings.postgres_port),
            "-U",
            settings.postgres_user,
            "-d",
            database,
            "-tAc",
            sql,
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return result.stdout.strip()


def _create_databases(settings: Settings) -> None:
    for database in (settings.catalog_database, settings.marquez_database):
        if not _psql(settings, f"SELECT 1 FROM pg_database WHERE datname = '{database}'"):
            _psql(settings, f'CREATE DATABASE "{database}"')


def _postgres_healthy(settings: Settings) -> bool:
    probe = subprocess.run(
        [_postgres_binary("pg_isready"), "-h", settings.host, "-p", str(settings.postgres_port), "-t", "2"],
        capture_output=True,
    )
    return probe.returncode == 0


POSTGRES = Service(
    name="postgres",
    replaced_by=("catalog_url", "marquez_url"),  # it stores only the local catalog and Marquez
    ports=lambda s: [s.postgres_port],
    command=lambda s: [
        _postgres_binary("postgres"),
        "-D",
        str(s.state_dir / "postgres" / "pgdata"),
        "-p",
        str(s.postgres_port),
        "-c",
        f"listen_addresses={s.host}",
        "-k",
        str(s.state_dir / "postgres" / "socket"),
    ],
    healthy=_postgres_healthy,
    address=lambda s: f"postgresql://{s.host}:{s.postgres_port}",
    prepare=_prepare_postgres,
    after_start=_create_databases,
    run_as=_postgres_user,
    stop_signal=2,  # SIGINT is PostgreSQL's "fast" shutdown; SIGTERM would wait for clients
)


# --- Kafka (KRaft): one node, or three (kafka_brokers), each a broker and a controller ------------


def _kafka_cluster_id(settings: Settings) -> str:
    """The id every node is formatted with: node 1's, chosen once."""
    record = settings.state_dir / "kafka" / "cluster-id"
    formatted = settings.state_dir / "kafka" / "log" / "meta.properties"
    if not record.exists():
        existing = (
            [line.split("=", 1)[1] for line in formatted.read_text().splitlines() if line.startswith("cluster.id=")]
            if formatted.exists()
            else []
        )
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(
            existing[0] if existing else base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        )
    return record.read_text().strip()


def _prepare_kafka_node(settings: Settings, node: int) -> None:
    data = settings.state_dir / _kafka_name(node)
    broker, controller = settings.kafka_node_ports(node)
    voters = ",".join(
        f"{n}@{settings.host}:{settings.kafka_node_ports(n)[1]}" for n in range(1, settings.kafka_brokers + 1)
    )
    # The quorum is fixed when the nodes are formatted: a different broker count needs a fresh state.
    formatted = (data / "log" / "meta.properties").exists()
    formatted_for = data / "brokers"
    if formatted and not formatted_for.exists():
        formatted_for.write_text("1")  # formatted before the broker count was a setting: a single node
    if formatted and formatted_for.read_text().strip() != str(settings.kafka_brokers):
        raise StackError(
            f"{_kafka_name(node)}: formatted for a Kafka of {formatted_for.read_text().strip()} broker(s), "
            f"LINEAGE_ASSETS_KAFKA_BROKERS={settings.kafka_brokers}; start from a fresh state (`make clean`) "
            f"or set it back"
        )
    replication = settings.topic_replication  # the brokers' own topics too
    config = render(
        "kafka-server.properties",
        data / "server.properties",
        node_id=node,
        voters=voters,
        host=settings.host,
        kafka_port=broker,
        kafka_controller_port=controller,
        data_dir=data / "log",
        replication=replication,
        min_isr=max(1, replication - 1),
    )
    if formatted:
        return  # formatted once; formatting again would wipe the topics
    subprocess.run(
        [
            java(),
            "-cp",
            jar_classpath(settings, "kafka"),
            f"-Dlog4j2.configurationFile={CONF_DIR / 'jvm-log4j2.properties'}",
            # `=` form: a base64 id may start with "-" and must not be read as an option.
            "kafka.tools.StorageTool",
            "format",
            f"--cluster-id={_kafka_cluster_id(settings)}",
            f"--config={config}",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    formatted_for.write_text(str(settings.kafka_brokers))


def _kafka_node_healthy(settings: Settings, node: int) -> bool:
    """The node answers on its broker listener with metadata that lists it (loaded, and in the cluster)."""
    from confluent_kafka.admin import AdminClient

    broker, _ = settings.kafka_node_ports(node)
    if not port_open(settings.host, broker):
        return False
    try:
        metadata = AdminClient({"bootstrap.servers": f"{settings.host}:{broker}"}).list_topics(timeout=3)
    except Exception:  # the broker answers only once its metadata is loaded
        return False
    return node in metadata.brokers


def _kafka_name(node: int) -> str:
    return "kafka" if node == 1 else f"kafka-{node}"


def kafka_node(node: int) -> Service:
    def command(settings: Settings) -> list[str]:
        return [
            java(),
            "-Xms256m",
            "-Xmx1g",
            "-XX:+UseG1GC",
            f"-Dlog4j2.configurationFile={CONF_DIR / 'jvm-log4j2.properties'}",
            "-cp",
            jar_classpath(settings, "kafka"),
            "kafka.Kafka",
            str(settings.state_dir / _kafka_name(node) / "server.properties"),
        ]

    return Service(
        name=_kafka_name(node),
        replaced_by=("kafka_bootstrap",),
        wanted=lambda s: node <= s.kafka_brokers,
        ports=lambda s: list(s.kafka_node_ports(node)),
        command=command,
        healthy=lambda s: _kafka_node_healthy(s, node),
        address=lambda s: f"{s.host}:{s.kafka_node_ports(node)[0]}",
        prepare=lambda s: _prepare_kafka_node(s, node),
    )


KAFKA, *KAFKA_NODES = (kafka_node(1), kafka_node(2), kafka_node(3))


# --- S3 (s3proxy, filesystem backend) ----------------------------------------------------------


def s3_client(settings: Settings):
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=settings.s3_url,
        aws_access_key_id=settings.s3_access_key,
        aws_secret_access_key=settings.s3_secret_key,
        region_name=settings.s3_region,
        # Checksums only where an operation requires them: S3-compatible stores (s3proxy among them)
        # reject the flexible-checksum headers boto3 sends by default.
        config=Config(
            s3={"addressing_style": "path"},
            retries={"max_attempts": 2},
            connect_timeout=2,
            read_timeout=10,
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        ),
    )


def _prepare_s3(settings: Settings) -> None:
    data = S3.data_dir(settings)
    (data / "blobs").mkdir(parents=True, exist_ok=True)
    render(
        "s3proxy.properties",
        data / "s3proxy.properties",
        host=settings.host,
        s3_port=settings.s3_port,
        s3_access_key=settings.s3_access_key,
        s3_secret_key=settings.s3_secret_key,
        data_dir=data / "blobs",
    )


def _s3_healthy(settings: Settings) -> bool:
    if not port_open(settings.host, settings.s3_port):
        return False
    try:
        s3_client(settings).list_buckets()
        return True
    except Exception:
        return False


def _create_buckets(settings: Settings) -> None:
    client = s3_client(settings)
    existing = {bucket["Name"] for bucket in client.list_buckets().get("Buckets", [])}
    for bucket in (settings.archive_bucket, settings.warehouse_bucket):
        if bucket not in existing:
            client.create_bucket(Bucket=bucket)


S3 = Service(
    name="s3",
    replaced_by=("s3_endpoint",),
    ports=lambda s: [s.s3_port],
    command=lambda s: [
        java(),
        "-Xmx512m",
        "-jar",
        single_jar(s, "s3proxy"),
        "--properties",
        str(s.state_dir / "s3" / "s3proxy.properties"),
    ],
    healthy=_s3_healthy,
    address=lambda s: s.s3_url,
    prepare=_prepare_s3,
    after_start=_create_buckets,
)


# --- Iceberg REST catalog ----------------------------------------------------------------------


def _iceberg_rest_env(settings: Settings) -> dict[str, str]:
    """The server reads its catalog properties from CATALOG_* variables (`__` = `-`, `_` = `.`)."""
    return {
        "CATALOG_CATALOG__IMPL": "org.apache.iceberg.jdbc.JdbcCatalog",
        "CATALOG_URI": settings.catalog_jdbc_url,
        "CATALOG_JDBC_USER": settings.postgres_user,
        # No password: the local PostgreSQL trusts loopback, and the server logs its properties.
        "CATALOG_JDBC_SCHEMA__VERSION": "V1",
        "CATALOG_WAREHOUSE": settings.warehouse_url,
        "CATALOG_IO__IMPL": "org.apache.iceberg.aws.s3.S3FileIO",
        "CATALOG_S3_ENDPOINT": settings.s3_url,
        "CATALOG_S3_PATH__STYLE__ACCESS": "true",
        # The S3 client's own credential chain, not catalog properties: the server logs those at start.
        "AWS_ACCESS_KEY_ID": settings.s3_access_key,
        "AWS_SECRET_ACCESS_KEY": settings.s3_secret_key,
        "CATALOG_CLIENT_REGION": settings.s3_region,
        "CATALOG_REST_HOST": settings.host,
        "CATALOG_REST_PORT": str(settings.iceberg_rest_port),
        # s3proxy rejects the SDK's default flexible-checksum headers.
        "AWS_REQUEST_CHECKSUM_CALCULATION": "WHEN_REQUIRED",
        "AWS_RESPONSE_CHECKSUM_VALIDATION": "WHEN_REQUIRED",
    }


ICEBERG_REST = Service(
    name="iceberg-rest",
    replaced_by=("catalog_url",),
    ports=lambda s: [s.iceberg_rest_port],
    command=lambda s: [
        java(),
        "-Xmx512m",
        f"-Dlog4j2.configurationFile={CONF_DIR / 'jvm-log4j2.properties'}",
        "-cp",
        jar_classpath(s, "iceberg-rest"),
        str(CONF_DIR / "IcebergRestOnHost.java"),  # on the settings' host
    ],
    healthy=lambda s: http_ok(f"{s.iceberg_catalog_url}/v1/config"),
    address=lambda s: s.iceberg_catalog_url,
    prepare=lambda s: ICEBERG_REST.data_dir(s).mkdir(parents=True, exist_ok=True),
    requires=("postgres", "s3"),
    env=_iceberg_rest_env,
)


# --- schema registry (Apicurio, Confluent-compatible API) ----------------------------------------

REGISTRY = Service(
    name="registry",
    replaced_by=("registry_url",),
    ports=lambda s: [s.registry_port],
    command=lambda s: [
        java(),
        "-Xmx512m",
        f"-Dquarkus.http.host={s.host}",
        f"-Dquarkus.http.port={s.registry_port}",
        # Schemas survive restarts in an H2 file (the 2.6 archive bundles no PostgreSQL driver).
        f"-Dquarkus.datasource.jdbc.url=jdbc:h2:file:{s.state_dir / 'registry' / 'h2' / 'registry'}",
        "-jar",
        str(next((s.jars_dir / "registry").glob("apicurio-registry-app-*-runner.jar"), "apicurio-runner-jar-missing")),
    ],
    healthy=lambda s: http_ok(f"http://{s.host}:{s.registry_port}/health/ready"),
    address=lambda s: s.schema_registry_url,
    prepare=lambda s: REGISTRY.data_dir(s).mkdir(parents=True, exist_ok=True),
)


# --- Marquez (lineage API and web UI), built from its release source ------------------------------

# The tag's `git archive`, as GitHub serves it at MARQUEZ_RELEASE_URL (commit 27a4a1357d90 in its pax header).
MARQUEZ_RELEASE_SHA256 = "7987a5888e46d7e9fb8efe32244afb260a4576fab1a3c9d84a3803dd27d631a4"


def _marquez_dir(settings: Settings) -> Path:
    return settings.cache_dir / "marquez"


def _marquez_web_dir(settings: Settings) -> Path:
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
            _tool("mvn", "install Maven"),
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
    web = _marquez_web_dir(settings)
    stamp = web / ".built"
    if _up_to_date(stamp, fingerprint):
        return
    progress("marquez-web  building the web UI with npm (about 3 min, up to 5 GB of memory)")
    shutil.rmtree(web, ignore_errors=True)
    shutil.copytree(sources / "web", web)
    npm = _tool("npm", "install Node.js 18 or later (apt-get install nodejs npm)")
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


def _prepare_marquez(settings: Settings) -> None:
    data = MARQUEZ.data_dir(settings)
    render(
        "marquez.yml",
        data / "marquez.yml",
        host=settings.host,
        marquez_port=settings.marquez_port,
        marquez_admin_port=settings.marquez_admin_port,
        jdbc_url=settings.marquez_jdbc_url,
        postgres_user=settings.postgres_user,
        postgres_password=settings.postgres_password,
    )


MARQUEZ = Service(
    name="marquez",
    replaced_by=("marquez_url",),
    ports=lambda s: [s.marquez_port, s.marquez_admin_port],
    command=lambda s: [
        java(),
        "-Xmx1g",
        "-cp",
        jar_classpath(s, "marquez"),
        "marquez.MarquezApp",
        "server",
        str(s.state_dir / "marquez" / "marquez.yml"),
    ],
    healthy=lambda s: http_ok(f"http://{s.host}:{s.marquez_admin_port}/healthcheck"),
    address=lambda s: s.marquez_api_url,
    build=_build_marquez_api,
    prepare=_prepare_marquez,
    requires=("postgres",),
    start_timeout=180.0,  # the first start migrates an empty database (about 10 s, much more on a loaded machine)
)


def _marquez_web_command(settings: Settings) -> list[str]:
    server = _marquez_web_dir(settings) / "setupProxy.js"
    if not (_marquez_web_dir(settings) / "dist" / "index.html").exists():
        raise StackError(
            f"marquez-web: no built UI in {server.parent}: run `make setup` (or `lineage-assets stack build`)"
        )
    return [
        _tool("node", "install Node.js 18 or later (apt-get install nodejs)"),
        "--require",
        str(CONF_DIR / "listen-on-host.js"),
        str(server),
    ]


def _marquez_web_env(settings: Settings) -> dict[str, str]:
    """The upstream server's variables; the API's address from marquez_api_url, so a remote Marquez works too."""
    api = urllib.parse.urlsplit(settings.marquez_api_url)
    return {
        "MARQUEZ_HOST": api.hostname or settings.host,
        "MARQUEZ_PORT": str(api.port or 80),
        "WEB_PORT": str(settings.marquez_web_port),
        "LISTEN_HOST": settings.host,
    }


MARQUEZ_WEB = Service(
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


# --- Spark standalone cluster (opt-in: LINEAGE_ASSETS_SPARK_MASTER=spark://HOST:SPARK_CLUSTER_PORT) -----


def _spark_daemon(settings: Settings, main_class: str, *arguments: str) -> list[str]:
    # Spark's launcher (bin/spark-class) ends in `exec java -cp <jars> <class>`: run that command
    # itself, so the supervisor finds the process under the command line it recorded.
    return [java(), "-Xmx512m", "-cp", f"{spark_home() / 'jars'}/*", main_class, *arguments]


def _spark_env(settings: Settings) -> dict[str, str]:
    """What bin/load-spark-env.sh would export: a worker builds its executors' command from these."""
    (core,) = (spark_home() / "jars").glob("spark-core_*.jar")  # spark-core_2.13-4.0.0.jar
    return {
        "SPARK_HOME": str(spark_home()),
        "SPARK_SCALA_VERSION": core.name.split("_")[1].split("-")[0],
        "SPARK_LOCAL_IP": settings.host,
    }  # the daemons' web UIs bind there too


def spark_master_state(settings: Settings) -> dict | None:
    """The master's view of the cluster (its status, workers and applications), None when it does not answer."""
    try:
        with urllib.request.urlopen(
            f"http://{settings.host}:{settings.spark_cluster_web_port}/json/", timeout=2
        ) as response:
            return json.load(response)
    except (urllib.error.URLError, OSError, ValueError):
        return None


def spark_worker_port(settings: Settings, number: int) -> int:
    return settings.spark_cluster_web_port + 2 * number - 1


SPARK_MASTER = Service(
    name="spark-master",
    wanted=lambda s: s.runs_spark_cluster,
    ports=lambda s: [s.spark_cluster_port, s.spark_cluster_web_port],
    command=lambda s: _spark_daemon(
        s,
        "org.apache.spark.deploy.master.Master",
        "--host",
        s.host,
        "--port",
        str(s.spark_cluster_port),
        "--webui-port",
        str(s.spark_cluster_web_port),
    ),
    healthy=lambda s: (spark_master_state(s) or {}).get("status") == "ALIVE",
    address=lambda s: s.local_spark_cluster_url,
    prepare=lambda s: SPARK_MASTER.data_dir(s).mkdir(parents=True, exist_ok=True),
    env=_spark_env,
)


def spark_worker(number: int) -> Service:
    def registered(settings: Settings) -> bool:
        address = (settings.host, spark_worker_port(settings, number))
        workers = (spark_master_state(settings) or {}).get("workers", [])
        return any((w.get("host"), w.get("port")) == address and w.get("state") == "ALIVE" for w in workers)

    def command(settings: Settings) -> list[str]:
        return _spark_daemon(
            settings,
            "org.apache.spark.deploy.worker.Worker",
            settings.local_spark_cluster_url,
            "--host",
            settings.host,
            "--port",
            str(spark_worker_port(settings, number)),
            "--webui-port",
            str(spark_worker_port(settings, number) + 1),
            "--cores",
            str(settings.spark_worker_cores),
            "--memory",
            settings.spark_worker_memory,
            "--work-dir",
            str(settings.state_dir / f"spark-worker-{number}" / "work"),
        )

    return Service(
        name=f"spark-worker-{number}",
        wanted=lambda s: s.runs_spark_cluster,
        ports=lambda s: [spark_worker_port(s, number), spark_worker_port(s, number) + 1],
        command=command,
        healthy=registered,  # alive, and registered with the master
        address=lambda s: f"{s.host}:{spark_worker_port(s, number)}",
        prepare=lambda s: (s.state_dir / f"spark-worker-{number}" / "work").mkdir(parents=True, exist_ok=True),
        requires=("spark-master",),
        # A worker launches executors from SPARK_HOME; they run this interpreter's Python.
        env=lambda s: {**_spark_env(s), "PYSPARK_PYTHON": sys.executable},
    )


SPARK_WORKERS = (spark_worker(1), spark_worker(2))

SERVICES: tuple[Service, ...] = (
    POSTGRES,
    KAFKA,
    *KAFKA_NODES,
    S3,
    ICEBERG_REST,
    REGISTRY,
    MARQUEZ,
    MARQUEZ_WEB,
    SPARK_MASTER,
    *SPARK_WORKERS,
)

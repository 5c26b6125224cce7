"""What each service of the local stack is: its jars or binary, config template, ports and health probe.

The supervisor (``supervisor.py``) starts, checks and stops any of them the same way; a service here
only says how. Templates live in ``infra/conf`` and are rendered with ``string.Template`` from the
settings, so a port is never written down twice.
"""

from __future__ import annotations

import base64
import os
import pwd
import shutil
import socket
import stat
import string
import subprocess
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from lineage_assets.settings import PROJECT_ROOT, Settings

CONF_DIR = PROJECT_ROOT / "infra" / "conf"
POSTGRES_BIN = Path("/usr/lib/postgresql/15/bin")


class StackError(RuntimeError):
    """A service could not be prepared, started or reached; the message names it and its log."""


@dataclass(frozen=True)
class Service:
    name: str
    ports: Callable[[Settings], list[int]]
    command: Callable[[Settings], list[str]]
    healthy: Callable[[Settings], bool]
    address: Callable[[Settings], str]
    # Once-only preparation (render config, format storage); must be idempotent.
    prepare: Callable[[Settings], None] = lambda settings: None
    # After the first healthy probe: buckets, databases. Idempotent too.
    after_start: Callable[[Settings], None] = lambda settings: None
    requires: tuple[str, ...] = ()
    # Settings that, when set, point the project at this service run elsewhere (a real cluster).
    replaced_by: tuple[str, ...] = ()
    run_as: Callable[[], str | None] = lambda: None
    stop_signal: int = 15
    start_timeout: float = 90.0
    env: Callable[[Settings], dict[str, str]] = field(default=lambda settings: {})

    def data_dir(self, settings: Settings) -> Path:
        return settings.state_dir / self.name

    def log_file(self, settings: Settings) -> Path:
        return settings.logs_dir / f"{self.name}.log"

    def replaced(self, settings: Settings) -> list[str]:
        """The settings that point elsewhere for this service (empty: the stack runs it)."""
        return [name for name in self.replaced_by if getattr(settings, name)]


def render(template: str, target: Path, **values) -> Path:
    text = string.Template((CONF_DIR / template).read_text()).substitute(values)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return target


def java() -> str:
    found = shutil.which("java")
    if not found:
        raise StackError("java not found on PATH: the stack needs a Java 17+ runtime (apt-get install openjdk-17-jre-headless)")
    return found


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
            raise StackError(f"postgres: user {user} cannot write {path}; give it access or set LINEAGE_ASSETS_STATE_DIR")


def _prepare_postgres(settings: Settings) -> None:
    data = POSTGRES.data_dir(settings)
    user = _postgres_user()
    (data / "socket").mkdir(parents=True, exist_ok=True)
    _chown_for(data, user)
    if (data / "pgdata" / "PG_VERSION").exists():
        return
    subprocess.run(
        [_postgres_binary("initdb"), "-D", str(data / "pgdata"), "-U", settings.postgres_user,
         "--auth=trust", "-E", "UTF8", "--no-locale"],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, **as_user(user),
    )


def _psql(settings: Settings, sql: str, database: str = "postgres") -> str:
    result = subprocess.run(
        [_postgres_binary("psql"), "-h", settings.host, "-p", str(settings.postgres_port),
         "-U", settings.postgres_user, "-d", database, "-tAc", sql],
        check=True, capture_output=True, text=True,
    )
    return result.stdout.strip()


def _create_databases(settings: Settings) -> None:
    database = settings.catalog_database
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
    replaced_by=("catalog_url",),  # it only stores the local catalog
    ports=lambda s: [s.postgres_port],
    command=lambda s: [
        _postgres_binary("postgres"), "-D", str(s.state_dir / "postgres" / "pgdata"),
        "-p", str(s.postgres_port), "-c", f"listen_addresses={s.host}",
        "-k", str(s.state_dir / "postgres" / "socket"),
    ],
    healthy=_postgres_healthy,
    address=lambda s: f"postgresql://{s.host}:{s.postgres_port}",
    prepare=_prepare_postgres,
    after_start=_create_databases,
    run_as=_postgres_user,
    stop_signal=2,  # SIGINT is PostgreSQL's "fast" shutdown; SIGTERM would wait for clients
)


# --- Kafka (KRaft) -----------------------------------------------------------------------------

def _prepare_kafka(settings: Settings) -> None:
    data = KAFKA.data_dir(settings)
    config = render(
        "kafka-server.properties", data / "server.properties",
        host=settings.host, kafka_port=settings.kafka_port,
        kafka_controller_port=settings.kafka_controller_port, data_dir=data / "log",
    )
    if (data / "log" / "meta.properties").exists():
        return  # formatted once; formatting again would wipe the topics
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    subprocess.run(
        [java(), "-cp", jar_classpath(settings, "kafka"), f"-Dlog4j2.configurationFile={CONF_DIR / 'jvm-log4j2.properties'}",
         # `=` form: a base64 id may start with "-" and must not be read as an option.
         "kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}", f"--config={config}"],
        check=True, capture_output=True, text=True,
    )


def _kafka_healthy(settings: Settings) -> bool:
    from confluent_kafka.admin import AdminClient

    if not port_open(settings.host, settings.kafka_port):
        return False
    try:
        AdminClient({"bootstrap.servers": settings.kafka_servers}).list_topics(timeout=3)
        return True
    except Exception:  # the broker answers only once its metadata is loaded
        return False


KAFKA = Service(
    name="kafka",
    replaced_by=("kafka_bootstrap",),
    ports=lambda s: [s.kafka_port, s.kafka_controller_port],
    command=lambda s: [
        java(), "-Xms256m", "-Xmx1g", "-XX:+UseG1GC",
        f"-Dlog4j2.configurationFile={CONF_DIR / 'jvm-log4j2.properties'}",
        "-cp", jar_classpath(s, "kafka"), "kafka.Kafka", str(s.state_dir / "kafka" / "server.properties"),
    ],
    healthy=_kafka_healthy,
    address=lambda s: s.kafka_servers,
    prepare=_prepare_kafka,
)


# --- S3 (s3proxy, filesystem backend) ----------------------------------------------------------

def s3_client(settings: Settings):
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3", endpoint_url=settings.s3_url, aws_access_key_id=settings.s3_access_key,
        aws_secret_access_key=settings.s3_secret_key, region_name=settings.s3_region,
        # Checksums only where an operation requires them: S3-compatible stores (s3proxy among them)
        # reject the flexible-checksum headers boto3 sends by default.
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2}, connect_timeout=2, read_timeout=10,
                      request_checksum_calculation="when_required", response_checksum_validation="when_required"),
    )


def _prepare_s3(settings: Settings) -> None:
    data = S3.data_dir(settings)
    (data / "blobs").mkdir(parents=True, exist_ok=True)
    render(
        "s3proxy.properties", data / "s3proxy.properties", host=settings.host, s3_port=settings.s3_port,
        s3_access_key=settings.s3_access_key, s3_secret_key=settings.s3_secret_key, data_dir=data / "blobs",
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
        java(), "-Xmx512m", "-jar", single_jar(s, "s3proxy"),
        "--properties", str(s.state_dir / "s3" / "s3proxy.properties"),
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
        "CATALOG_JDBC_PASSWORD": settings.postgres_password,
        "CATALOG_JDBC_SCHEMA__VERSION": "V1",
        "CATALOG_WAREHOUSE": settings.warehouse_url,
        "CATALOG_IO__IMPL": "org.apache.iceberg.aws.s3.S3FileIO",
        "CATALOG_S3_ENDPOINT": settings.s3_url,
        "CATALOG_S3_PATH__STYLE__ACCESS": "true",
        "CATALOG_S3_ACCESS__KEY__ID": settings.s3_access_key,
        "CATALOG_S3_SECRET__ACCESS__KEY": settings.s3_secret_key,
        "CATALOG_CLIENT_REGION": settings.s3_region,
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
        java(), "-Xmx512m", f"-Dlog4j2.configurationFile={CONF_DIR / 'jvm-log4j2.properties'}",
        "-cp", jar_classpath(s, "iceberg-rest"), "org.apache.iceberg.rest.RESTCatalogServer",
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
        java(), "-Xmx512m", f"-Dquarkus.http.host={s.host}", f"-Dquarkus.http.port={s.registry_port}",
        # Schemas survive restarts in an H2 file (the 2.6 archive bundles no PostgreSQL driver).
        f"-Dquarkus.datasource.jdbc.url=jdbc:h2:file:{s.state_dir / 'registry' / 'h2' / 'registry'}",
        "-jar", str(next((s.jars_dir / "registry").glob("apicurio-registry-app-*-runner.jar"), "apicurio-runner-jar-missing")),
    ],
    healthy=lambda s: http_ok(f"http://{s.host}:{s.registry_port}/health/ready"),
    address=lambda s: s.schema_registry_url,
    prepare=lambda s: REGISTRY.data_dir(s).mkdir(parents=True, exist_ok=True),
)


SERVICES: tuple[Service, ...] = (POSTGRES, KAFKA, S3, ICEBERG_REST, REGISTRY)

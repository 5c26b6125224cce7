"""The storage services: PostgreSQL (the databases of Marquez and of the Iceberg catalog) and S3
(s3proxy on a filesystem backend)."""

from __future__ import annotations

import os
import pwd
import stat
import subprocess
from pathlib import Path

from lineage_assets.connections import s3_client
from lineage_assets.settings import Settings
from lineage_assets.stack import security
from lineage_assets.stack.probes import port_open
from lineage_assets.stack.services.base import (
    Service,
    StackError,
    as_user,
    java,
    render,
)

POSTGRES_BIN = Path("/usr/lib/postgresql/15/bin")


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
    data.mkdir(parents=True, exist_ok=True)
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


def empty_database(settings: Settings, database: str) -> None:
    """``database`` of the local PostgreSQL dropped, its sessions closed, and made again empty."""
    _psql(settings, f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
    _psql(settings, f'CREATE DATABASE "{database}"')


def ensure_database(settings: Settings, database: str) -> None:
    """``database`` in the local stack's PostgreSQL, made if it is not there."""
    if not _psql(settings, f"SELECT 1 FROM pg_database WHERE datname = '{database}'"):
        _psql(settings, f'CREATE DATABASE "{database}"')


def _create_databases(settings: Settings) -> None:
    for database in (settings.catalog_database, settings.marquez_database):
        ensure_database(settings, database)


def _postgres_healthy(settings: Settings) -> bool:
    probe = subprocess.run(
        # As the stack's user: without -U the probe logs in as the OS user, which the server logs as a FATAL error.
        [
            _postgres_binary("pg_isready"),
            *("-h", settings.host, "-p", str(settings.postgres_port), "-U", settings.postgres_user, "-d", "postgres"),
            *("-t", "2"),
        ],
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
        # No Unix-domain socket: every client connects over TCP, and a socket's path (at most 107 bytes)
        # would make a state folder deep enough unusable.
        "-c",
        "unix_socket_directories=",
    ],
    healthy=_postgres_healthy,
    address=lambda s: f"postgresql://{s.host}:{s.postgres_port}",
    prepare=_prepare_postgres,
    after_start=_create_databases,
    run_as=_postgres_user,
    stop_signal=2,  # SIGINT is PostgreSQL's "fast" shutdown; SIGTERM would wait for clients
)


# --- S3 (s3proxy, filesystem backend) ----------------------------------------------------------


def s3proxy_properties(settings: Settings, target: Path, endpoint: str) -> Path:
    """s3proxy's configuration at ``target``: the stack's keys and blob folder, served at ``endpoint``
    (its properties' endpoint lines)."""
    return render(
        "s3proxy.properties",
        target,
        endpoint=endpoint,
        s3_access_key=settings.s3_access_key,
        s3_secret_key=settings.s3_secret_key,
        data_dir=S3.data_dir(settings) / "blobs",
    )


def s3proxy_command(settings: Settings, properties: Path) -> list[str]:
    return [java(), "-Xmx512m", "-jar", S3.single_jar(settings), "--properties", str(properties)]


def _prepare_s3(settings: Settings) -> None:
    data = S3.data_dir(settings)
    (data / "blobs").mkdir(parents=True, exist_ok=True)
    if settings.tls:
        keystore, password = security.server_keystore(settings)
        endpoint = (
            f"s3proxy.secure-endpoint={settings.s3_url}\n"
            f"s3proxy.keystore-path={keystore}\n"
            f"s3proxy.keystore-password={password}"
        )
    else:
        endpoint = f"s3proxy.endpoint={settings.s3_url}"
    s3proxy_properties(settings, data / "s3proxy.properties", endpoint)


def _s3_healthy(settings: Settings) -> bool:
    if not port_open(settings.host, settings.s3_port):
        return False
    try:
        # A probe answers at once or counts as not healthy, like the other services' (a process
        # that holds the port and never answers would otherwise cost 30 s of retries).
        s3_client(settings, read_timeout=2, attempts=1).list_buckets()
        return True
    except Exception:
        return False


def _create_buckets(settings: Settings) -> None:
    client = s3_client(settings)
    existing = {bucket["Name"] for bucket in client.list_buckets().get("Buckets", [])}
    for bucket in (settings.archive_bucket, settings.warehouse_bucket):
        if bucket not in existing:
            client.create_bucket(Bucket=bucket)


S3: Service = Service(
    name="s3",
    jars="s3proxy",
    replaced_by=("s3_endpoint",),
    ports=lambda s: [s.s3_port],
    command=lambda s: s3proxy_command(s, s.state_dir / "s3" / "s3proxy.properties"),
    healthy=_s3_healthy,
    address=lambda s: s.s3_url,
    prepare=_prepare_s3,
    after_start=_create_buckets,
)

"""What the test stack and a running streaming job show other users of the machine: no credential in
any process's arguments, none in a file or log but those a server must read (owner-only), and no
listener beyond the settings' interface."""

from __future__ import annotations

import socket
import stat
from pathlib import Path

import pytest

from lineage_assets.stack.services.engine import CONTAINER_SECRETS
from lineage_assets.streaming.deployments import LocalDeployments
from tests.conftest import wait_for
from tests.integration.test_deployments import orders_topic_ready, processes_of
from tests.suite import SHARED_PIPELINE

pytestmark = pytest.mark.xdist_group(SHARED_PIPELINE)  # the test stack's own topics, tables and lineage

NAME = "orders_archive"


@pytest.fixture(scope="module")
def deployed(stack, settings):
    """The archive job deployed (its Spark driver up, its query planned), stopped after the module's tests."""
    orders_topic_ready(settings)
    deployments = LocalDeployments(settings, running_interval=3, trigger_seconds=2)
    try:
        assert deployments.deploy(NAME) in ("started", "restarted")
        progress = deployments.files(NAME).progress_file
        wait_for(
            lambda: progress.exists() and '"event": "lineage"' in progress.read_text(),
            timeout=240,
            what="the deployment's query plan",
        )
        yield deployments.folder(NAME)
    finally:
        deployments.stop(NAME)


def descendants(roots: set[int]) -> set[int]:
    """``roots`` and every process below them."""
    parents = {}
    for proc in Path("/proc").iterdir():
        try:
            parents[int(proc.name)] = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (ValueError, OSError, IndexError):
            continue
    found, grew = set(roots), True
    while grew:
        below = {pid for pid, parent in parents.items() if parent in found} - found
        found |= below
        grew = bool(below)
    return found


def listeners(pids: set[int]) -> dict[tuple[str, int], int]:
    """Every listening TCP socket of ``pids``: (address, port) -> pid."""
    inodes = {}
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = fd.readlink().as_posix() if fd.is_symlink() else ""
                if target.startswith("socket:["):
                    inodes[target[8:-1]] = pid
        except OSError:
            continue
    found = {}
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != "0A" or fields[9] not in inodes:  # 0A: LISTEN
                continue
            address, port = fields[1].split(":")
            raw = bytes.fromhex(address)
            # /proc prints each 32-bit word in host (little-endian) order.
            raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            found[(socket.inet_ntop(family, raw), int(port, 16))] = inodes[fields[9]]
    return found


def test_no_listener_of_the_stack_or_a_running_job_is_beyond_the_settings_host(stack, settings, deployed):
    roots = {status.pid for status in stack.status() if status.pid} | set(processes_of(deployed))
    found = listeners(descendants(roots))
    ours = {settings.host, f"::ffff:{settings.host}"}
    assert len(set(found.values())) >= len(stack.status())  # every server listens...
    assert set(found.values()) & descendants(set(processes_of(deployed)))  # ...and the job's driver
    assert {address: pid for address, pid in found.items() if address[0] not in ours} == {}


def test_a_secret_is_in_no_argument_and_only_in_files_a_server_must_read_owner_only(stack, settings, deployed):
    secret = settings.s3_secret_key.encode()
    assert secret.startswith(b"test-secret-")  # the session's own value, found nowhere by chance
    running = descendants({status.pid for status in stack.status() if status.pid} | set(processes_of(deployed)))
    in_arguments = {pid for pid in running if secret in Path(f"/proc/{pid}/cmdline").read_bytes()}
    assert in_arguments == set()

    holding = {}
    for path in settings.state_dir.rglob("*"):
        try:
            if path.is_file() and not path.is_symlink() and secret in path.read_bytes():
                holding[path.relative_to(settings.state_dir).as_posix()] = stat.S_IMODE(path.stat().st_mode)
        except OSError:
            continue  # a file that went away while the folder was read
    job_secrets = (deployed / "spark-secrets.properties").relative_to(settings.state_dir).as_posix()
    # The file the project's containers read theirs from, if a test ran containers (one per pipeline).
    containers = {path for path in holding if Path(path).name == CONTAINER_SECRETS}
    assert {path: holding[path] for path in holding if path not in containers} == {
        "s3/s3proxy.properties": 0o600,
        job_secrets: 0o600,
    }
    assert {holding[path] for path in containers} <= {0o600}
    assert stat.S_IMODE(settings.state_dir.stat().st_mode) & 0o066 == 0  # no one else lists or reads it

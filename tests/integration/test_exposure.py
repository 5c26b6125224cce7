"""What the test stack and a running streaming job show other users of the machine: no credential in
any process's arguments, none in a file or log but those a server must read (owner-only), and no
listener beyond the settings' interface."""

from __future__ import annotations

import stat
from dataclasses import dataclass
from pathlib import Path

import pytest

from lineage_assets.processes import descendants, listeners
from lineage_assets.stack.services.engine import CONTAINER_SECRETS
from lineage_assets.streaming.deployments import LocalDeployments
from lineage_assets.testing import module_pipeline
from tests.conftest import wait_for
from tests.integration.test_deployments import orders_topic_ready, processes_of
from tests.process_arguments import ArgumentSampler

settings = module_pipeline("exposure")  # its deployment beside the shared pipeline's, on another worker

NAME = "orders_archive"


@dataclass(frozen=True)
class Deployed:
    deployments: LocalDeployments
    folder: Path
    arguments: ArgumentSampler  # every process's on the machine, from before the deploy on


@pytest.fixture(scope="module")
def deployed(stack, settings):
    """The archive job deployed (its Spark driver up, its query planned), stopped after the module's tests
    if a test has not stopped it."""
    orders_topic_ready(settings)
    deployments = LocalDeployments(settings, running_interval=3, trigger_seconds=2)
    with ArgumentSampler(settings.s3_secret_key.encode()) as arguments:
        try:
            assert deployments.deploy(NAME) in ("started", "restarted")
            progress = deployments.files(NAME).progress_file
            wait_for(
                lambda: progress.exists() and '"event": "lineage"' in progress.read_text(),
                timeout=240,
                what="the deployment's query plan",
            )
            yield Deployed(deployments, deployments.folder(NAME), arguments)
        finally:
            deployments.stop(NAME)


def test_no_listener_of_the_stack_or_a_running_job_is_beyond_the_settings_host(stack, settings, deployed):
    roots = {status.pid for status in stack.status() if status.pid} | set(processes_of(deployed.folder))
    found = listeners(descendants(roots))
    ours = {settings.host, f"::ffff:{settings.host}"}
    assert len(set(found.values())) >= len(stack.status())  # every server listens...
    assert set(found.values()) & descendants(set(processes_of(deployed.folder)))  # ...and the job's driver
    assert {address: pid for address, pid in found.items() if address[0] not in ours} == {}


def test_a_secret_is_in_no_argument_of_a_deploy_and_stop_and_only_in_files_a_server_must_read_owner_only(
    stack, stack_settings, settings, deployed
):
    secret = settings.s3_secret_key.encode()
    assert secret.startswith(b"test-secret-")  # the session's own value, found nowhere by chance
    holding = {}
    state = stack_settings.state_dir  # the whole stack's, this module's pipeline's folder within it
    for path in state.rglob("*"):
        try:
            if path.is_file() and not path.is_symlink() and secret in path.read_bytes():
                holding[path.relative_to(state).as_posix()] = stat.S_IMODE(path.stat().st_mode)
        except OSError:
            continue  # a file that went away while the folder was read
    job_secrets = deployed.folder / "spark-secrets.properties"
    assert holding.get(job_secrets.relative_to(state).as_posix()) == 0o600
    # Besides s3proxy's, only files of the project's own that hold secrets for a process: the one its
    # containers read theirs from and each deployment's job secrets, this one's and those of the
    # pipelines of their own that other tests ran on this stack (each under its own folder here).
    own = {path for path in holding if Path(path).name in (CONTAINER_SECRETS, job_secrets.name)}
    assert {path: holding[path] for path in holding if path not in own} == {"s3/s3proxy.properties": 0o600}
    assert {holding[path] for path in own} == {0o600}
    assert stat.S_IMODE(state.stat().st_mode) & 0o066 == 0  # no one else lists or reads it

    # Every process on the machine, from before the deploy until its stop is done: the stack's
    # servers, the runner, the job's spark-submit and driver, the stop's own.
    assert deployed.deployments.stop(NAME) == "stopped"
    assert deployed.arguments.holding == {}
    assert deployed.arguments.saw(b"--properties-file", str(deployed.folder).encode())  # the job's start was seen

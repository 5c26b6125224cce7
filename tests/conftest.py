"""Test-session fixtures: one local stack of real servers for the whole session.

Tests run their own stack (own state folder, ports shifted by TEST_PORT_OFFSET) so a developer's
running stack is never touched; it is started once per session and stopped at the end.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lineage_assets.lineage.event_log import file_lock
from lineage_assets.processes import command_line, pids_naming, terminate
from lineage_assets.settings import Settings
from lineage_assets.stack.supervisor import Supervisor

TEST_PORT_OFFSET = 10000

pytest_plugins = ["tests.suite"]


# An S3 credential of the session's own, which the exposure tests look for everywhere; every stack of
# the session has it, since some share the test stack's S3. The workers of one parallel run share it
# (they share the test stack), derived from their run's id.
_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID")
SESSION_S3_SECRET = f"test-secret-{hashlib.sha256(_RUN.encode()).hexdigest()[:16] if _RUN else secrets.token_hex(8)}"


# The suite's Spark jobs are short and its machine has two cores: their JVMs use only the JIT's quick
# tier, which spends about 40% less CPU on a short job (the servers, long-lived, keep the full JIT).
QUICK_SPARK = "-XX:TieredStopAtLevel=1"


def isolated_settings(name: str, offset: int = TEST_PORT_OFFSET, **overrides) -> Settings:
    defaults = {"s3_secret_key": SESSION_S3_SECRET, "spark_java_options": QUICK_SPARK}
    return dataclasses.replace(Settings.from_env().beside(name, offset), **{**defaults, **overrides})


def pipeline_of_its_own(settings: Settings, name: str) -> Settings:
    """``settings`` for a pipeline of its own on the same stack: topics, archive prefix, Iceberg and
    lineage namespaces and a state folder (checkpoints, event log, deployments) named after ``name``,
    so that no other test's data or lineage is in it."""
    snake = name.replace("-", "_")
    return dataclasses.replace(
        settings,
        state_dir=settings.state_dir / name,
        orders_topic=f"{name}-orders",
        supplier_stats_topic=f"{name}-supplier-stats",
        dead_letter_topic=f"{name}-orders-dlq",
        archive_prefix=f"{name}-orders",
        iceberg_namespace=snake,
        lineage_namespace=f"lineage_assets_{snake}",
    )


def wait_for(condition, timeout: float, what: str, poll: float = 1.0):
    """The first true value of ``condition()``, asked every ``poll`` seconds for up to ``timeout``."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(poll)
    return value


@contextlib.contextmanager
def another_process_serving(port: int, folder: Path, answers: str = "/") -> Iterator[None]:
    """Python's own HTTP server on ``port`` in a process of its own, serving ``folder``, from the moment
    ``answers`` answers until the block ends: a squatter on a service's port."""
    from lineage_assets.stack.probes import http_ok

    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: http_ok(f"http://127.0.0.1:{port}{answers}"), 10, f"a server on port {port}", poll=0.05)
        yield
    finally:
        server.terminate()
        server.wait()


@pytest.fixture(scope="session", autouse=True)
def no_sender_outlives_the_session(tmp_path_factory):
    """Lineage senders of the tests' own folders end with the session: one whose backend never
    answers keeps retrying while events wait, and pytest keeps the folders of recent sessions."""
    yield
    base = tmp_path_factory.getbasetemp()
    terminate(
        [pid for pid in pids_naming(base) if "lineage_assets.lineage.sender" in (command_line(pid) or ())], timeout=10
    )


@pytest.fixture(scope="session")
def settings() -> Settings:
    return isolated_settings("test-stack")


@pytest.fixture(scope="session")
def stack(settings: Settings):
    """The test stack, started afresh by the first process of a run that needs it; the other workers of
    a parallel run use it as it is (``tests/suite.py`` stops it once they are all done)."""
    supervisor = Supervisor(settings, progress=print)
    with file_lock(settings.state_dir.with_name(f"{settings.state_dir.name}.lock")):
        if not started_for_this_run(settings):
            supervisor.down()  # whatever an interrupted earlier session left behind
            # An earlier session's lineage senders too: still lingering, each would deliver this session's
            # new log again (it holds the lock of the log folder deleted here, not of the new one).
            terminate(pids_naming(settings.lineage_dir), timeout=10)
            shutil.rmtree(settings.state_dir, ignore_errors=True)
            supervisor.up()
            if _RUN:
                (settings.state_dir / STARTED_FOR).write_text(_RUN)
        else:
            supervisor.up()  # already running: each service is found healthy
    yield supervisor
    if not _RUN:
        supervisor.down()


STARTED_FOR = "started-for-run"


def started_for_this_run(settings: Settings) -> bool:
    marker = settings.state_dir / STARTED_FOR
    return _RUN is not None and marker.is_file() and marker.read_text() == _RUN


@pytest.fixture
def stack_of_its_own(tmp_path):
    """Supervisors of stacks of the test's own (each ``isolated_settings(name, offset, **overrides)``
    with its state in the test's folder); whatever they started is stopped after the test."""
    made: list[Supervisor] = []

    def supervisor(name: str, offset: int, **overrides) -> Supervisor:
        made.append(Supervisor(isolated_settings(name, offset=offset, state_dir=tmp_path / name, **overrides)))
        return made[-1]

    yield supervisor
    for each in made:
        each.down()


@pytest.fixture
def spark_jobs(settings: Settings):
    """spark-submit as the assets use it, for the session's settings: each job a JVM of its own."""
    from lineage_assets.resources.settings import SettingsResource
    from lineage_assets.resources.spark_jobs import SparkJobsResource

    return SparkJobsResource(environment=SettingsResource.of(settings))


@pytest.fixture(scope="session")
def spark(settings: Settings):
    """One Spark session for the whole test session, with the project's configuration.

    Catalogs connect lazily, so unit tests use it without servers; the asset checks'
    ``CheckSparkResource`` gets this same session back from ``getOrCreate``.
    """
    from lineage_assets.spark_conf import in_process_session

    session = in_process_session(settings, {"spark.app.name": "lineage-assets-tests"})
    yield session
    session.stop()


ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"
# What this machine's closed network needs: no background calls to Google's services.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def browser():
    """Debian's headless Chromium (installed by `make setup`), driven by Playwright."""
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium")
    assert executable, "Chromium is missing: `make setup` installs Debian's chromium package"
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def browser_page(browser):
    """A fresh tab in its own browser context, laptop-sized, patient with servers under test load."""
    context = browser.new_context(viewport={"width": 1600, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(60_000)
    yield page
    context.close()


@pytest.fixture
def screenshots(request) -> Path:
    """Where a browser test saves its screenshots (kept as CI artifacts)."""
    folder = ARTIFACTS / "screenshots" / request.node.name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder

"""Test-session fixtures. The stack of real servers the whole session shares, and the settings beside
a developer's running stack that keep it untouched, are ``lineage_assets.testing``'s (a plugin, as any
repository testing the assets uses it)."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lineage_assets.processes import command_line, pids_naming, sigterm_kept, terminate
from lineage_assets.settings import Settings
from lineage_assets.stack.supervisor import Supervisor

pytest_plugins = ["tests.suite", "lineage_assets.testing"]


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
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:  # once in a suite's run it outlived SIGTERM, and its test hung
            server.kill()
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


@pytest.fixture(autouse=True)
def sigterm_as_it_was():
    """A test's own Dagster run in this worker leaves SIGTERM as the project's runs do not
    (``sigterm_kept``): the processes the next tests start must stop on SIGTERM."""
    with sigterm_kept():
        yield


@pytest.fixture
def stack_of_its_own(tmp_path):
    """Supervisors of stacks of the test's own (each ``isolated_settings(name, offset, **overrides)``
    with its state in the test's folder); whatever they started is stopped after the test."""
    from lineage_assets.testing import isolated_settings  # imported once pytest registered it, to rewrite its asserts

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
def spark(stack_settings: Settings):
    """One Spark session for the whole test session, with the project's configuration.

    Catalogs connect lazily, so unit tests use it without servers; the asset checks'
    ``CheckSparkResource`` gets this same session back from ``getOrCreate``.
    """
    from lineage_assets.spark_conf import in_process_session

    session = in_process_session(stack_settings, {"spark.app.name": "lineage-assets-tests"})
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

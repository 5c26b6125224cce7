"""How the suite is divided and run: its tiers, and the groups the workers run side by side.

Tiers are markers applied from the fixtures a test uses, directly or through other fixtures; a test
with none of them is pure (no JVM, no server). Each tier's count and time are printed at the end.

Under pytest-xdist (`make test` runs three workers, ``--dist loadgroup``) a group runs whole on one
worker, in collection order: the modules on the test stack's own pipeline (its topics, tables, state
and lineage folder) form one group, marked ``xdist_group(SHARED_PIPELINE)``; the tests of the cluster
profile and of Docker share a group each (their fixtures live as long as their folder); any other
module is a group of its own. The longest groups are handed out first.
"""

from __future__ import annotations

import uuid
from collections import defaultdict

import pytest

# Listed from the most specific tier, which is the one a test is counted in at the end.
TIER_FIXTURES = {
    "browser": {"browser"},  # Debian's Chromium, against the test stack
    "docker": {"engine"},  # a Docker engine and the project's image
    "cluster": {"cluster_profile"},  # three Kafka brokers and a Spark standalone cluster
    "secured": {"secured_profile"},  # the tls profile: a whole stack of its own
    "stack": {"stack", "stack_of_its_own"},  # real servers
    "spark": {"spark", "spark_jobs"},  # a Spark JVM: the in-process session, or spark-submit
}
PURE = "pure"
SHARED_PIPELINE = "test-stack-pipeline"
FOLDER_GROUPS = ("cluster", "docker", "secured")  # tiers whose fixtures are package-scoped
# The order groups are handed out in: the shared pipeline first, then by tier, heaviest first.
ORDER = [SHARED_PIPELINE, "cluster", "docker", "secured", "browser", "stack", "spark", PURE]


def tier_of(keywords) -> str:
    return next((tier for tier in TIER_FIXTURES if tier in keywords), PURE)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for tier, fixtures in TIER_FIXTURES.items():
            if fixtures & used:
                item.add_marker(tier)
        if item.get_closest_marker("xdist_group") is None:
            tier = tier_of(item.keywords)
            item.add_marker(pytest.mark.xdist_group(tier if tier in FOLDER_GROUPS else item.nodeid.split("::")[0]))
    items.sort(key=lambda item: ORDER.index(_rank(item)))


def _rank(item: pytest.Item) -> str:
    group = item.get_closest_marker("xdist_group")
    return SHARED_PIPELINE if group is not None and group.args[0] == SHARED_PIPELINE else tier_of(item.keywords)


def pytest_configure(config: pytest.Config) -> None:
    # The controller of a parallel run names the run, so that it knows which test stack is its own.
    if not hasattr(config, "workerinput") and getattr(config.option, "numprocesses", None):
        config.option.testrunuid = config.option.testrunuid or uuid.uuid4().hex


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The controller of a parallel run stops the test stack its workers shared."""
    config = session.config
    run = getattr(config.option, "testrunuid", None)
    if hasattr(config, "workerinput") or not run:
        return
    from lineage_assets.stack.supervisor import Supervisor
    from lineage_assets.testing import STARTED_FOR, isolated_settings

    settings = isolated_settings("test-stack")
    marker = settings.state_dir / STARTED_FOR
    if marker.is_file() and marker.read_text() == run:
        Supervisor(settings).down()


_tier_totals: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
_group_seconds: dict[str, float] = defaultdict(float)
HEAVIEST_GROUPS = 12


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # A report carries its test's markers as keywords, also when it comes from a worker.
    totals = _tier_totals[tier_of(report.keywords)]
    totals["seconds"] += report.duration
    _group_seconds[_group_of(report)] += report.duration
    if report.when == "call" or (report.when == "setup" and not report.passed):
        totals["tests"] += 1


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _tier_totals:
        return
    terminalreporter.section("tiers")
    for tier in [*TIER_FIXTURES, PURE][::-1]:
        if tier in _tier_totals:
            counts = _tier_totals[tier]
            terminalreporter.write_line(
                f"{tier:<8} {int(counts['tests']):>4} tests  {counts['seconds'] / 60:6.1f} min"
                " (set-up, call and tear-down, shared fixtures counted where they start)"
            )
    terminalreporter.section(f"the {HEAVIEST_GROUPS} heaviest groups (what one worker runs whole)")
    for group, seconds in sorted(_group_seconds.items(), key=lambda pair: -pair[1])[:HEAVIEST_GROUPS]:
        terminalreporter.write_line(f"{seconds / 60:6.1f} min  {group}")


def _group_of(report: pytest.TestReport) -> str:
    """The xdist group a report's test ran in (xdist appends ``@group`` to its node id); else its module."""
    return report.nodeid.rsplit("@", 1)[1] if "@" in report.nodeid else report.nodeid.split("::")[0]

"""Testing the pipeline's assets against real servers, beside the development stack (docs/testing.md).

A pytest plugin: ``pytest_plugins = ["lineage_assets.testing"]`` in a repository's top conftest.py
gives its tests the fixtures ``settings`` (a stack of the tests' own next to the development stack)
and ``stack`` (that stack, started for the session); ``pipeline_of_its_own`` gives a test topics,
tables, namespaces and a state folder nobody else writes, and ``materialize`` runs assets and checks
with every resource bound to the settings it is given (``build_asset_context``, to invoke one directly).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import secrets
import shutil
from collections.abc import Iterator, Sequence

import dagster as dg
import pytest

from lineage_assets.lineage.event_log import file_lock
from lineage_assets.processes import pids_naming, sigterm_kept, terminate
from lineage_assets.resources.binding import build_resources
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.settings import Settings
from lineage_assets.settings_environment import settings_from_env
from lineage_assets.stack.supervisor import Supervisor

TEST_PORT_OFFSET = 10000
TEST_STACK = "test-stack"  # the name of the tests' stack: its state folder under the development one's

# The id of a pytest-xdist run, which every worker of that run shares; None outside one.
_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID")
# An S3 credential of the session's own, which no other stack has: the workers of one parallel run
# share it (they share the tests' stack), derived from their run's id.
SESSION_S3_SECRET = f"test-secret-{hashlib.sha256(_RUN.encode()).hexdigest()[:16] if _RUN else secrets.token_hex(8)}"
# Tests' Spark jobs are short: their JVMs use only the JIT's quick tier, which spends about 40% less
# CPU on a short job, in one compiler thread, which compiles less of what a short job runs only a
# few times (another 5-8%); the servers, long-lived, keep the full JIT.
QUICK_SPARK = "-XX:TieredStopAtLevel=1 -XX:CICompilerCount=1"
STARTED_FOR = "started-for-run"  # the file in the stack's state folder naming the parallel run that started it


def isolated_settings(name: str, offset: int = TEST_PORT_OFFSET, **overrides) -> Settings:
    """The settings of a stack of its own beside the one the environment names: its state in the
    folder ``name`` under that one's, every port shifted by ``offset``, an S3 secret of the session's
    own and quick Spark JVMs; ``overrides`` replace any field."""
    defaults = {"s3_secret_key": SESSION_S3_SECRET, "spark_java_options": QUICK_SPARK}
    return dataclasses.replace(settings_from_env().beside(name, offset), **{**defaults, **overrides})


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
        suppliers_topic=f"{name}-suppliers",
        archive_prefix=f"{name}-orders",
        iceberg_namespace=snake,
        lineage_namespace=f"lineage_assets_{snake}",
    )


def resources_for(settings: Settings) -> dict:
    """Every resource the assets and checks require, reading ``settings``: for ``dg.materialize`` or
    ``dg.build_asset_context``."""
    return build_resources(SettingsResource.of(settings))


def materialize(
    assets: Sequence[dg.AssetsDefinition | dg.AssetChecksDefinition | dg.AssetSpec | dg.SourceAsset],
    settings: Settings,
    **arguments,
) -> dg.ExecuteInProcessResult:
    """``dg.materialize`` of ``assets`` (and checks) with every resource reading ``settings``;
    ``arguments`` are ``dg.materialize``'s own (``run_config``, ``partition_key``, ``instance``, ...)."""
    with sigterm_kept():
        return dg.materialize(assets, resources=resources_for(settings), **arguments)


def build_asset_context(asset: dg.AssetsDefinition, settings: Settings, **arguments) -> dg.AssetExecutionContext:
    """``dg.build_asset_context`` for invoking ``asset`` directly, with the resources it requires
    reading ``settings``: a context starts every resource it is given (the checks' Spark session too);
    ``arguments`` are ``dg.build_asset_context``'s own."""
    required = {
        key: resource for key, resource in resources_for(settings).items() if key in asset.required_resource_keys
    }
    return dg.build_asset_context(resources=required, **arguments)


@pytest.fixture(scope="session")
def stack_settings() -> Settings:
    """The settings of the tests' stack, beside the development stack (ports shifted by 10000)."""
    return isolated_settings(TEST_STACK)


@pytest.fixture(scope="session")
def settings(stack_settings: Settings) -> Settings:
    """The settings the tests' assets run with: the tests' stack and its own pipeline, unless a module
    gives its tests a pipeline of their own (``module_pipeline``)."""
    return stack_settings


def module_pipeline(name: str):
    """A ``settings`` fixture for one test module, ``settings = module_pipeline(name)`` in it: its tests
    run on ``pipeline_of_its_own(stack_settings, name)``, so they may run beside the stack's own pipeline
    (under pytest-xdist, on another worker)."""

    @pytest.fixture(scope="module", name="settings")
    def pipeline_settings(stack_settings: Settings) -> Settings:
        return pipeline_of_its_own(stack_settings, name)

    return pipeline_settings


@pytest.fixture(scope="session")
def stack(stack_settings: Settings) -> Iterator[Supervisor]:
    """The tests' stack, started afresh by the first process of a run that needs it and stopped at
    the session's end; the workers of a pytest-xdist run share it as it is, and leave it running for
    their controller to stop (the project's own: ``tests/suite.py``)."""
    supervisor = Supervisor(stack_settings, progress=print)
    with file_lock(stack_settings.state_dir.with_name(f"{stack_settings.state_dir.name}.lock")):
        if not started_for_this_run(stack_settings):
            supervisor.down()  # whatever an interrupted earlier session left behind
            # An earlier session's lineage senders too: still lingering, each would deliver this session's
            # new log again (it holds the lock of the log folder deleted here, not of the new one).
            terminate(pids_naming(stack_settings.lineage_dir), timeout=10)
            shutil.rmtree(stack_settings.state_dir, ignore_errors=True)
            supervisor.up()
            if _RUN:
                (stack_settings.state_dir / STARTED_FOR).write_text(_RUN)
        else:
            supervisor.up()  # already running: each service is found healthy
    yield supervisor
    if not _RUN:
        supervisor.down()


def started_for_this_run(settings: Settings) -> bool:
    marker = settings.state_dir / STARTED_FOR
    return _RUN is not None and marker.is_file() and marker.read_text() == _RUN

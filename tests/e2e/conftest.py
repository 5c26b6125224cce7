"""One execution of the whole pipeline on the test stack, shared by the end-to-end tests."""

from __future__ import annotations

import datetime as dt

import dagster as dg
import pytest

from lineage_assets.definitions import publish_definitions
from lineage_assets.demo import run_pipeline
from lineage_assets.generator import GeneratorConfig
from lineage_assets.resources.settings import SettingsResource

START = dt.datetime(2026, 11, 20, 23, 56, 0, tzinfo=dt.UTC)  # the orders cross midnight
GENERATOR = GeneratorConfig(count=400, seed=11, start=START, late_fraction=0.03, bad_fraction=0.04)
ORDERS_CONFIG = {
    "count": GENERATOR.count,
    "seed": GENERATOR.seed,
    "start": START.isoformat(),
    "late_fraction": GENERATOR.late_fraction,
    "bad_fraction": GENERATOR.bad_fraction,
}


@pytest.fixture(scope="session")
def instance():
    return dg.DagsterInstance.ephemeral()


@pytest.fixture(scope="session")
def runs(stack, settings, spark, instance):
    """The design published (as `make demo` does), then the pipeline twice: on generated orders, then
    again with no new orders."""
    publish_definitions(settings)
    environment = SettingsResource.of(settings)
    first = run_pipeline(environment, instance, ORDERS_CONFIG)
    second = run_pipeline(environment, instance, None)
    return first, second


DELIVERY_TIMEOUT_S = 90  # a sender backing off from a stopped Marquez waits up to 30 s between tries


@pytest.fixture(scope="module")
def marquez(runs, settings):
    """The test stack's Marquez once every event of the run has been delivered to it."""
    from lineage_assets.lineage.emitter import emitter_for
    from lineage_assets.lineage.marquez import MarquezApi

    assert emitter_for(settings).flush(timeout=DELIVERY_TIMEOUT_S), "the event log was not delivered to Marquez"
    return MarquezApi(settings.marquez_api_url)

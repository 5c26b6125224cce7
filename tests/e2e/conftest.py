"""One execution of the whole pipeline on the test stack, shared by the end-to-end tests."""

from __future__ import annotations

import datetime as dt

import dagster as dg
import pytest

from lineage_assets.assets.common import asset_key
from lineage_assets.datasets import LINEAGE_CHECK, SUPPLIER_STATS, Dataset
from lineage_assets.definitions import build_definitions, publish_definitions
from lineage_assets.demo import run_pipeline
from lineage_assets.generator import GeneratorConfig
from lineage_assets.job_specs import JobSpec
from lineage_assets.resources.settings import SettingsResource

START = dt.datetime(2026, 11, 20, 23, 56, 0, tzinfo=dt.UTC)  # the orders cross midnight
DAY = "2026-11-21"  # of the test stack's orders
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
    return MarquezApi.of(settings)


def materialize(settings, instance, dataset: Dataset, script: str | None = None) -> dg.ExecuteInJobResult:
    """``dataset``'s asset as the pipeline runs it (its day ``DAY`` when partitioned), its Spark job from
    ``script`` when given: a changed copy of the job."""
    definitions = build_definitions(SettingsResource.of(settings))
    with pytest.MonkeyPatch.context() as patched:
        if script is not None:
            changed = property(lambda spec: script if spec.dataset is dataset else spec.dataset.job.source)
            patched.setattr(JobSpec, "script", changed)
        return dg.materialize(
            [*definitions.assets],
            instance=instance,
            selection=[asset_key(dataset)],
            partition_key=DAY if dataset is SUPPLIER_STATS else None,
            resources=definitions.resources,
            raise_on_error=False,
        )


def lineage_check_of(result: dg.ExecuteInJobResult) -> dg.AssetCheckEvaluation:
    """The run's ``lineage_matches_catalog`` of the asset it materialized."""
    (evaluation,) = [e for e in result.get_asset_check_evaluations() if e.check_name == LINEAGE_CHECK]
    return evaluation

"""A bad setting stops `lineage-assets demo` before any order is produced or any lineage recorded, in
one line that names the setting and its value (no traceback); a Dagster run is refused the same way."""

from __future__ import annotations

import os
import subprocess
import sys

import dagster as dg
import pytest

from lineage_assets.assets.common import asset_key
from lineage_assets.datasets import ORDERS
from lineage_assets.definitions import build_definitions
from lineage_assets.lineage.emitter import LineageEmitter
from lineage_assets.resources.kafka import KafkaResource
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.settings_environment import as_environment
from lineage_assets.testing import module_pipeline
from tests.integration.test_deployments import orders_topic_ready

settings = module_pipeline("bad-settings")  # its topics beside the shared pipeline's, on another worker

BAD = {  # variable: (value, the start of the one line that says so)
    "LINEAGE_ASSETS_SPARK_MASTER": ("garbage", "LINEAGE_ASSETS_SPARK_MASTER='garbage': a Spark master URL"),
    "LINEAGE_ASSETS_KAFKA_BOOTSTRAP": (
        "no-such-kafka.invalid:9092",
        "LINEAGE_ASSETS_KAFKA_BOOTSTRAP='no-such-kafka.invalid:9092': host no-such-kafka.invalid does not resolve",
    ),
    "LINEAGE_ASSETS_MARQUEZ_URL": (
        "127.0.0.1:25000",
        "LINEAGE_ASSETS_MARQUEZ_URL='127.0.0.1:25000': an http:// or https:// URL",
    ),
    "LINEAGE_ASSETS_S3_ENDPOINT": (
        "http://127.0.0.1:1",
        "LINEAGE_ASSETS_S3_ENDPOINT='http://127.0.0.1:1': nothing answers at 127.0.0.1:1 within 2 s",
    ),
    "LINEAGE_ASSETS_KAFKA_PORT": ("99999", "LINEAGE_ASSETS_KAFKA_PORT=99999: a TCP port is 1 to 65535"),
}


@pytest.fixture(scope="module")
def ready(stack, settings):
    return orders_topic_ready(settings)


def recorded(settings) -> int:
    return len(LineageEmitter(settings.lineage_dir).events())


@pytest.mark.parametrize("variable", BAD)
def test_a_bad_setting_stops_the_demo_before_it_produces_anything(ready, settings, variable):
    value, said = BAD[variable]
    offsets, events = KafkaResource(environment=ready).end_offsets(settings.orders_topic), recorded(settings)
    result = subprocess.run(
        [sys.executable, "-m", "lineage_assets.cli", "demo", "--orders", "5"],
        capture_output=True,
        text=True,
        env={**os.environ, **as_environment(settings), variable: value},
        timeout=600,
    )
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"lineage-assets: {said}"), line
    assert "Traceback" not in result.stderr + result.stdout and "orders:" not in result.stdout
    assert KafkaResource(environment=ready).end_offsets(settings.orders_topic) == offsets
    assert recorded(settings) == events


def refused_orders_run(settings, variable: str, value: str) -> tuple[str, list[dict]]:
    """A Dagster run of the orders asset with ``variable`` set to ``value``, which must fail: its
    step's error and the lineage events it recorded besides Dagster's own run."""
    environment = SettingsResource(overrides={**as_environment(settings), variable: value})
    definitions = build_definitions(environment)
    events = recorded(settings)
    result = dg.materialize(
        [*definitions.assets],
        selection=[asset_key(ORDERS)],
        resources=definitions.resources,
        instance=dg.DagsterInstance.ephemeral(),
        raise_on_error=False,
        run_config={"ops": {"orders": {"config": {"count": 5}}}},
    )
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure).step_failure_data.error
    recorded_since = [
        e for e in LineageEmitter(settings.lineage_dir).events()[events:] if e["job"]["name"] != "dagster"
    ]
    return (failure.cause or failure).message, recorded_since


def test_a_dagster_run_with_a_bad_setting_fails_before_its_lineage_starts(ready, settings):
    error, recorded_since = refused_orders_run(settings, "LINEAGE_ASSETS_S3_ENDPOINT", "http://127.0.0.1:1")
    assert "LINEAGE_ASSETS_S3_ENDPOINT='http://127.0.0.1:1': nothing answers at 127.0.0.1:1" in error
    assert recorded_since == []

"""The servers restart under a running deployment (`stack down`, then `stack up`, as around a machine
restart that spared the deployment): the ingestion either resumes or ends with one FAIL, never stays
RUNNING without progress, and from its checkpoint it loses and doubles nothing.

The module runs its own servers (Kafka, S3, the Iceberg catalog and its PostgreSQL, the registry) so
that stopping them disturbs no other test; the lineage goes to the test stack's Marquez. The test
session's Spark reads the table through a catalog and a bucket named for this module."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from lineage_assets.datasets import LAKEHOUSE_ORDERS, iceberg_table_name
from lineage_assets.generator import GeneratorConfig, generate_orders, produce_orders
from lineage_assets.lineage.emitter import emitter_for
from lineage_assets.lineage.marquez import MarquezApi
from lineage_assets.spark_conf import spark_conf
from lineage_assets.stack.supervisor import Supervisor
from lineage_assets.streaming.deployments import LocalDeployments
from lineage_assets.testing import isolated_settings
from tests.conftest import wait_for
from tests.integration.test_deployments import orders_topic_ready, rows_and_orders

SERVERS = ["postgres", "kafka", "s3", "iceberg-rest", "registry"]
NAME = LAKEHOUSE_ORDERS.key
TERMINAL = {"COMPLETE", "FAIL", "ABORT"}


@pytest.fixture(scope="module")
def own_stack(stack, settings, tmp_path_factory):
    restarted = isolated_settings(
        "restart",
        offset=10400,
        state_dir=tmp_path_factory.mktemp("restart"),
        marquez_url=settings.marquez_api_url,
        lineage_namespace="lineage_assets_restart",
        catalog_name="restart",
        warehouse_bucket="restart-warehouse",
    )
    supervisor = Supervisor(restarted, progress=print)
    supervisor.up(SERVERS)
    yield restarted, supervisor
    supervisor.down(SERVERS)


@pytest.fixture(scope="module")
def spark_reading(own_stack, spark):
    """The session's Spark with this module's catalog too; its bucket's S3 endpoint is set for that
    catalog alone (another bucket name: Hadoop caches a file system per bucket)."""
    settings, _ = own_stack
    catalog = f"spark.sql.catalog.{settings.catalog_name}"
    for key, value in spark_conf(settings).items():
        if key == catalog or key.startswith(f"{catalog}."):
            spark.conf.set(key, value)
    spark.conf.set(f"{catalog}.hadoop.fs.s3a.endpoint", settings.s3_url)
    return spark


def test_servers_restarted_under_a_running_ingestion_lose_and_double_nothing(own_stack, spark_reading):
    spark = spark_reading
    settings, supervisor = own_stack
    orders_topic_ready(settings)
    orders = list(
        generate_orders(GeneratorConfig(count=90, seed=1717, start=dt.datetime(2026, 11, 4, 9, tzinfo=dt.UTC)))
    )
    ids = [order.key for order in orders]
    table = iceberg_table_name(settings, "orders")
    emitter = emitter_for(settings)

    def produce(part) -> None:
        produce_orders(part, settings)

    def ingested() -> tuple[int, int]:
        return rows_and_orders(spark, table, ids)

    def ends(run_id: str) -> list[str]:
        return [e["eventType"] for e in emitter.events() if e["run"]["runId"] == run_id and e["eventType"] in TERMINAL]

    deployments = LocalDeployments(settings, running_interval=3, trigger_seconds=2)
    produce(orders[:30])
    assert deployments.deploy(NAME) == "started"
    runs = [deployments.status(NAME).run_id]
    try:
        wait_for(lambda: ingested()[1] >= 30, 180, "the first orders in Iceberg")

        down_at = time.monotonic()
        assert supervisor.down(SERVERS)
        time.sleep(20)  # several triggers with no Kafka, no catalog and no S3
        supervisor.up(SERVERS)
        back_at = time.monotonic()
        produce(orders[30:])

        def resumed_or_ended() -> str | None:
            """Either the deployment came through, or it ended with its FAIL; a dead one still RUNNING
            is the one wrong answer (the wait times out)."""
            status = deployments.status(NAME)
            if not status.running and ends(status.run_id):
                return "ended"
            return "resumed" if ingested()[1] >= len(ids) else None

        outcome = wait_for(resumed_or_ended, 240, "the deployment to resume or end")
        if outcome == "ended":
            assert ends(runs[0]) == ["FAIL"]
            assert deployments.deploy(NAME) == "started"  # from its checkpoint
            runs.append(deployments.status(NAME).run_id)
            wait_for(lambda: ingested()[1] >= len(ids), 240, "the redeployed ingestion to catch up")
        caught_up = time.monotonic()
        assert deployments.stop(NAME, drain=True) == "stopped"
    finally:
        deployments.stop(NAME)
    rows, distinct = ingested()
    print(
        f"\nservers down {back_at - down_at:.0f} s under the ingestion: it {outcome}; {len(ids)} "
        f"produced, {distinct} in "
        f"the table, {rows - distinct} duplicates; caught up {caught_up - back_at:.0f} s after the servers were back"
    )
    assert (rows, distinct) == (len(ids), len(ids))
    # Every run of the deployment ended exactly once; the last by the drain, as Marquez shows it too.
    assert [ends(run) for run in runs] == [["FAIL"]] * (len(runs) - 1) + [["COMPLETE"]]
    assert emitter.flush(timeout=90)
    marquez = MarquezApi.of(settings)
    assert [marquez.run(run)["state"] for run in runs] == ["FAILED"] * (len(runs) - 1) + ["COMPLETED"]

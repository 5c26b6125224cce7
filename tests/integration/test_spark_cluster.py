"""The whole pipeline on the stack's Spark standalone cluster (a master and two workers, started for
this module): every job runs there, executors on both workers, the results are exact, and the
lineage is the asset graph's with the same job and dataset identity and nesting as in local mode."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import urllib.request
from collections import defaultdict
from decimal import Decimal

import dagster as dg
import pytest
from pyspark.sql import functions as F

from lineage_assets.datasets import DATASETS, ORCHESTRATOR_JOB, SUPPLIER_STATS, iceberg_table_name
from lineage_assets.demo import run_pipeline
from lineage_assets.lineage.check import check
from lineage_assets.lineage.emitter import emitter_for
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.stack.services import SPARK_MASTER, SPARK_WORKERS, spark_master_state, spark_worker_port
from lineage_assets.stack.supervisor import Supervisor

DAY = dt.date(2026, 11, 2)  # no other test writes orders for this day
ORDERS = {"count": 120, "seed": 4242, "start": dt.datetime.combine(DAY, dt.time(8), dt.UTC).isoformat(), "interval_seconds": 30.0}
CLUSTER = [SPARK_MASTER.name, *(worker.name for worker in SPARK_WORKERS)]


@pytest.fixture(scope="module")
def cluster(stack, settings):
    """The test stack's settings with the jobs on its own Spark cluster, which runs for this module."""
    on_cluster = dataclasses.replace(settings, spark_master=settings.local_spark_cluster_url)
    supervisor = Supervisor(on_cluster, progress=print)
    assert {service.name for service in supervisor.selected(None)} >= set(CLUSTER)  # the setting alone asks for it
    supervisor.up(CLUSTER)
    yield on_cluster
    supervisor.down(CLUSTER)


@pytest.fixture(scope="module")
def pipeline(cluster):
    """One pass of the pipeline on the cluster, with the lineage events it emitted."""
    emitter = emitter_for(cluster)
    before = len(emitter.events())
    run = run_pipeline(SettingsResource.of(cluster), dg.DagsterInstance.ephemeral(), ORDERS)
    assert emitter.flush(timeout=90)
    return run, emitter.events()[before:]


def worker_executors(settings, number: int) -> set[str]:
    """The applications that ran an executor on worker ``number``."""
    with urllib.request.urlopen(f"http://{settings.host}:{spark_worker_port(settings, number) + 1}/json/", timeout=5) as response:
        worker = json.load(response)
    return {executor["appid"] for executor in worker["executors"] + worker["finishedexecutors"]}


def test_every_job_runs_on_the_cluster_with_an_executor_on_each_worker(cluster, pipeline):
    apps = {app["name"]: app for app in spark_master_state(cluster)["completedapps"]}
    # The three streaming jobs' catch-up runs and the batch job (its application named for the lineage).
    assert {"archive_orders", "live_supplier_stats", "ingest_orders", SUPPLIER_STATS.job.spark_application} <= set(apps)
    on_both = worker_executors(cluster, 1) & worker_executors(cluster, 2)
    for name in ("archive_orders", "live_supplier_stats", "ingest_orders", SUPPLIER_STATS.job.spark_application):
        assert apps[name]["state"] == "FINISHED" and apps[name]["cores"] == cluster.spark_cores_per_job, name
        assert apps[name]["id"] in on_both, name


def test_the_pipeline_on_the_cluster_is_exact(cluster, pipeline, spark):
    run, _ = pipeline
    assert all(run.checks.values()), run.checks
    assert DAY.isoformat() in run.days
    orders = spark.table(iceberg_table_name(cluster, "orders")).where(F.to_date("bid_time") == F.lit(DAY))
    expected = defaultdict(lambda: (Decimal(0), 0))
    for row in orders.collect():
        total, count = expected[row.supplier]
        expected[row.supplier] = (total + row.price, count + 1)
    assert sum(count for _, count in expected.values()) == ORDERS["count"]  # every order of the day, once
    assert run.supplier_totals[DAY.isoformat()] == dict(expected)


def test_the_lineage_on_the_cluster_is_the_asset_graph_nested_as_in_local_mode(cluster, pipeline):
    _, events = pipeline
    assert check(events, cluster) == []
    jobs = {event["job"]["name"] for event in events}
    assert jobs == {ORCHESTRATOR_JOB, SUPPLIER_STATS.job.spark_application, *(d.job.lineage_name for d in DATASETS.values()),
                    *(f"{ORCHESTRATOR_JOB}.check.{name}" for name in ("archive_reconciles_with_topic",
                                                                      "orders_reconcile_with_topic", "orders_values_in_range"))}
    roots = {e["run"]["runId"] for e in events if e["job"]["name"] == ORCHESTRATOR_JOB}
    runs_of = {e["run"]["runId"]: e["job"]["name"] for e in events}
    for event in events:
        if event["job"]["name"] == ORCHESTRATOR_JOB:
            continue
        parent = event["run"]["facets"]["parent"]
        assert parent["root"]["run"]["runId"] in roots if "root" in parent else parent["run"]["runId"] in roots
        if event["job"]["name"] == SUPPLIER_STATS.job.spark_application:
            # The Spark application under the asset's run, on the cluster as in local mode.
            assert runs_of[parent["run"]["runId"]] == SUPPLIER_STATS.job.lineage_name

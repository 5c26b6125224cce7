"""The whole pipeline on the cluster profile (tests/conftest.py: a Spark standalone master and two
workers, three Kafka brokers): every job runs on the Spark cluster with executors on both workers,
the results are exact, and the lineage is the asset graph's with the same job and dataset identity
and nesting as in local mode. Then a worker dies in the middle of the batch job, and the job
finishes on the other one."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import threading
import time
import urllib.request
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import dagster as dg
import pytest
from pyspark.sql import functions as F

from lineage_assets.datasets import DATASETS, ORCHESTRATOR_JOB, SUPPLIER_STATS, iceberg_table_name
from lineage_assets.definitions import build_definitions
from lineage_assets.demo import run_pipeline
from lineage_assets.lineage.check import check
from lineage_assets.lineage.emitter import emitter_for
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.spark_conf import committed_table
from lineage_assets.stack.services.spark_cluster import SPARK_WORKERS, spark_master_state, spark_worker_port
from lineage_assets.stack.supervisor import Supervisor

DAY = dt.date(2026, 11, 2)  # no other test writes orders for this day
ORDERS = {
    "count": 120,
    "seed": 4242,
    "start": dt.datetime.combine(DAY, dt.time(8), dt.UTC).isoformat(),
    "interval_seconds": 30.0,
}


@pytest.fixture(scope="module")
def cluster(cluster_profile):
    """The profile's settings, with a record of each Spark application's time printed at the end."""
    settings, _ = cluster_profile
    yield settings
    print(f"\nSpark applications on the cluster (s): {application_seconds(settings)}")


@pytest.fixture(scope="module")
def pipeline(cluster):
    """One pass of the pipeline on the cluster, with the lineage events it emitted."""
    emitter = emitter_for(cluster)
    before = len(emitter.events())
    started = time.monotonic()
    run = run_pipeline(SettingsResource.of(cluster), dg.DagsterInstance.ephemeral(), ORDERS)
    print(f"\nthe pipeline on the cluster profile: {time.monotonic() - started:.0f} s for {ORDERS['count']} orders")
    assert emitter.flush(timeout=90)
    return run, emitter.events()[before:]


def worker_executors(settings, number: int) -> set[str]:
    """The applications that ran an executor on worker ``number``."""
    with urllib.request.urlopen(
        f"http://{settings.host}:{spark_worker_port(settings, number) + 1}/json/", timeout=5
    ) as response:
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


def application_seconds(settings) -> dict[str, list[float]]:
    """Each finished application's run time on the cluster, by name."""
    seconds = defaultdict(list)
    for app in (spark_master_state(settings) or {}).get("completedapps", []):
        seconds[app["name"]].append(round(app["duration"] / 1000, 1))
    return dict(seconds)


def hourly_totals_of_the_day(spark, settings) -> dict[tuple[str, int], tuple[Decimal, int]]:
    """(supplier, hour) -> (total price, orders) of DAY, from the ingested orders."""
    orders = committed_table(spark, iceberg_table_name(settings, "orders")).where(F.to_date("bid_time") == F.lit(DAY))
    expected = defaultdict(lambda: (Decimal(0), 0))
    for row in orders.collect():
        total, count = expected[(row.supplier, row.bid_time.hour)]
        expected[(row.supplier, row.bid_time.hour)] = (total + row.price, count + 1)
    return dict(expected)


def supplier_stats_of_the_day(spark, settings) -> dict[tuple[str, int], tuple[Decimal, int]]:
    rows = (
        committed_table(spark, iceberg_table_name(settings, "supplier_stats"))
        .where(F.col("bid_date") == F.lit(DAY))
        .collect()
    )
    stats = {(r.supplier, r.bid_hour): (r.total_price, r.total_count) for r in rows}
    assert len(stats) == len(rows)  # one row per supplier and hour
    return stats


def test_the_pipeline_on_the_cluster_is_exact(cluster, pipeline, spark):
    run, _ = pipeline
    assert all(run.checks.values()), run.checks
    assert DAY.isoformat() in run.days
    expected = hourly_totals_of_the_day(spark, cluster)
    assert sum(count for _, count in expected.values()) == ORDERS["count"]  # every order of the day, once
    assert supplier_stats_of_the_day(spark, cluster) == expected
    by_supplier = defaultdict(lambda: (Decimal(0), 0))
    for (supplier, _), (total, count) in expected.items():
        by_supplier[supplier] = (by_supplier[supplier][0] + total, by_supplier[supplier][1] + count)
    assert run.supplier_totals[DAY.isoformat()] == dict(by_supplier)


def test_the_lineage_on_the_cluster_is_the_asset_graph_nested_as_in_local_mode(cluster, pipeline):
    _, events = pipeline
    assert check(events, cluster) == []
    jobs = {event["job"]["name"] for event in events}
    assert jobs == {
        ORCHESTRATOR_JOB,
        SUPPLIER_STATS.job.spark_application,
        *(d.job.lineage_name for d in DATASETS.values()),
        *(
            f"{ORCHESTRATOR_JOB}.check.{name}"
            for name in ("archive_reconciles_with_topic", "orders_reconcile_with_topic", "orders_values_in_range")
        ),
    }
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


def executors_of(settings, number: int) -> list[int]:
    """Live executor processes that worker ``number`` launched (they name it in their command line)."""
    worker_url = f"spark://Worker@{settings.host}:{spark_worker_port(settings, number)}".encode()
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            command = (proc / "cmdline").read_bytes() if proc.name.isdigit() else b""
        except OSError:
            continue
        if b"CoarseGrainedExecutorBackend" in command and worker_url in command:
            pids.append(int(proc.name))
    return pids


def test_a_worker_killed_in_the_middle_of_the_batch_job_costs_a_retry_not_a_row(cluster, pipeline, spark):
    """Worker 2 and its executors die (SIGKILL, as a lost machine) while the batch job runs: the job
    finishes on worker 1, the day's statistics are exact, and the lineage ends each run once, COMPLETE."""
    supervisor = Supervisor(cluster)
    (worker,) = supervisor.status([SPARK_WORKERS[1].name])
    application = SUPPLIER_STATS.job.spark_application
    killed: dict = {}

    def kill_worker_2_once_the_job_uses_it() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            active = {
                app["id"]
                for app in (spark_master_state(cluster) or {}).get("activeapps", [])
                if app["name"] == application
            }
            executors = executors_of(cluster, 2)
            if active & worker_executors(cluster, 2) and executors:
                for pid in [worker.pid, *executors]:
                    os.kill(pid, signal.SIGKILL)
                killed.update(app=active.pop(), at=time.monotonic(), executors=len(executors))
                return
            time.sleep(0.2)

    emitter = emitter_for(cluster)
    before = len(emitter.events())
    definitions = build_definitions(SettingsResource.of(cluster))
    killer = threading.Thread(target=kill_worker_2_once_the_job_uses_it)
    killer.start()
    try:
        started = time.monotonic()
        result = dg.materialize(
            [*definitions.assets],
            selection=[dg.AssetKey(SUPPLIER_STATS.asset_key_path)],
            partition_key=DAY.isoformat(),
            resources=definitions.resources,
            instance=dg.DagsterInstance.ephemeral(),
            raise_on_error=False,
        )
        finished = time.monotonic()
        killer.join()
        assert killed, "worker 2 never ran an executor of the batch job"
        assert result.success
        assert emitter.flush(timeout=90)
        apps = {app["id"]: app for app in spark_master_state(cluster)["completedapps"]}
        assert apps[killed["app"]]["state"] == "FINISHED" and killed["app"] in worker_executors(cluster, 1)
        print(
            f"\nworker 2 killed {killed['at'] - started:.1f} s into the batch job ({killed['executors']} executor(s)); "
            f"the job finished {finished - killed['at']:.1f} s later, {finished - started:.1f} s in all"
        )
    finally:
        killer.join()
        supervisor.up([SPARK_WORKERS[1].name])  # the cluster whole again

    assert supplier_stats_of_the_day(spark, cluster) == hourly_totals_of_the_day(spark, cluster)
    events = emitter.events()[before:]  # this materialization's (the whole graph is checked above)
    for job in (SUPPLIER_STATS.job.lineage_name, application):
        runs = {e["run"]["runId"] for e in events if e["job"]["name"] == job}
        assert len(runs) == 1, job
        # The lost executors' tasks were retried inside the application: its run and the asset's end once.
        assert [e["eventType"] for e in events if e["job"]["name"] == job] == ["START", "COMPLETE"], job

"""Streaming deployments on the real stack: continuous ingestion, its lifecycle lineage, idempotent deploys."""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from lineage_assets.connections import s3_client
from lineage_assets.datasets import (
    ARCHIVE,
    LAKEHOUSE_ORDERS,
    ORDERS_AVRO_SCHEMA,
    SUPPLIER_STATS_LIVE,
    iceberg_table_name,
    orders_avro_schema_json,
)
from lineage_assets.definitions import build_definitions
from lineage_assets.generator import GeneratorConfig, generate_orders, produce_orders
from lineage_assets.job_specs import STREAMING_JOBS
from lineage_assets.lineage.emitter import emitter_for
from lineage_assets.lineage.marquez import MarquezApi
from lineage_assets.resources.kafka import KafkaResource
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.settings_environment import as_environment
from lineage_assets.spark_conf import committed_table
from lineage_assets.streaming.deployments import LocalDeployments
from lineage_assets.streaming.folder import read_json
from lineage_assets.testing import module_pipeline, pipeline_of_its_own
from tests.conftest import wait_for
from tests.openlineage_schemas import validate_event

settings = module_pipeline("deployments")  # its deployments beside the shared pipeline's, on another worker

NAME = LAKEHOUSE_ORDERS.key


def run_events(settings, run_id):
    return [e for e in emitter_for(settings).events() if e["run"]["runId"] == run_id]


def marquez_state(settings, run_id) -> str | None:
    """The run's state as Marquez shows it, once the event log is delivered."""
    assert emitter_for(settings).flush(timeout=90)
    return MarquezApi.of(settings).run(run_id).get("state")


def marquez_events(settings, run_id) -> list[dict]:
    """The run's events as Marquez stored them, oldest first, once the event log is delivered."""
    assert emitter_for(settings).flush(timeout=90)
    return [e for e in reversed(MarquezApi.of(settings).events()) if e["run"]["runId"] == run_id]


def processes_of(folder: Path) -> list[int]:
    """Live processes whose command line names the deployment folder (the runner and its Spark job)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if str(folder) in (proc / "cmdline").read_bytes().decode(errors="replace"):
                    pids.append(int(proc.name))
            except OSError:
                continue
    return pids


def rows_with_ids(spark, table: str, ids: list[str]) -> int:
    """Rows of the Iceberg table with these order ids, as committed now (0 before the table exists)."""
    if not spark.catalog.tableExists(table.replace("`", "")):
        return 0  # the deployment creates it with its first batch
    return committed_table(spark, table).where(F.col("order_id").isin(ids)).count()


def rows_and_orders(spark, table: str, ids: list[str]) -> tuple[int, int]:
    """(rows, distinct orders) with these order ids in the Iceberg table as committed now: equal when
    no order is doubled."""
    if not spark.catalog.tableExists(table.replace("`", "")):
        return 0, 0
    row = (
        committed_table(spark, table)
        .where(F.col("order_id").isin(ids))
        .agg(F.count("*"), F.countDistinct("order_id"))
        .first()
    )
    return row[0], row[1]


def orders_topic_ready(settings) -> SettingsResource:
    """The settings' orders and dead-letter topics, and the orders value schema, as a deployment needs them."""
    environment = SettingsResource.of(settings)
    kafka = KafkaResource(environment=environment)
    kafka.ensure_topics(settings.orders_topic, settings.dead_letter_topic)
    kafka.register_value_schema(settings.orders_topic, orders_avro_schema_json())
    return environment


@pytest.fixture(scope="module")
def environment(stack, settings):
    return orders_topic_ready(settings)


@pytest.fixture(autouse=True)
def no_deployment_outlives_its_test(environment):
    yield
    deployments = LocalDeployments(environment.settings)
    for name in STREAMING_JOBS:
        deployments.stop(name)


def test_continuous_ingestion_lifecycle(environment, settings, spark):
    deployments = LocalDeployments(settings, running_interval=3, trigger_seconds=2)
    table = iceberg_table_name(settings, "orders")
    orders = list(
        generate_orders(GeneratorConfig(count=60, seed=2026, start=dt.datetime(2026, 11, 19, 8, tzinfo=dt.UTC)))
    )
    produce_orders(orders[:1], settings)  # schema and topic exist

    found = current_snapshot(spark, table)
    assert deployments.deploy(NAME) == "started"
    assert deployments.deploy(NAME) == "unchanged"
    folder = deployments.folder(NAME)
    first = deployments.status(NAME)
    assert first.running

    # While deployed, a catch-up run of the same job (same checkpoint) is refused, saying why.
    import dagster as dg

    definitions = build_definitions(environment)
    refused = dg.materialize(
        [*definitions.assets],
        selection=[dg.AssetKey(["lakehouse", "orders"])],
        resources=definitions.resources,
        raise_on_error=False,
    )
    assert not refused.success  # as it started, before any step (its streaming job is claimed first)
    assert not [e for e in refused.all_events if e.event_type == dg.DagsterEventType.STEP_START]
    (refusal,) = [e for e in refused.all_events if e.event_type == dg.DagsterEventType.RESOURCE_INIT_FAILURE]
    assert "lineage-assets stop lakehouse/orders" in refusal.event_specific_data.error.message

    produce_orders(orders[1:], settings)
    ids = [o.key for o in orders]

    def ingested() -> int:
        return rows_with_ids(spark, table, ids)

    wait_for(lambda: ingested() >= len(ids), 180, "the deployed ingestion to write the orders")
    assert ingested() == len(ids)  # each once
    wait_for(
        lambda: len([e for e in run_events(settings, first.run_id) if e["eventType"] == "RUNNING"]) >= 2,
        60,
        "two RUNNING events",
    )
    events = run_events(settings, first.run_id)
    assert events[0]["eventType"] == "START"
    running = [e for e in events if e["eventType"] == "RUNNING"]
    assert max(e["run"]["facets"]["streamingProgress"]["processedRows"] for e in running + [events[-1]]) >= 0
    assert events[0]["job"]["facets"]["jobType"]["emissionPattern"] == {
        "eventTrigger": "PERIODIC",
        "eventContentMode": "COMPLETE_SNAPSHOT",
        "windowDuration": 3,
    }
    assert len([p for p in processes_of(folder) if p == first.pid]) == 1
    # Each RUNNING event after a commit names the table's snapshot and its metrics as of that snapshot.
    wait_for(
        lambda: any(
            e["outputs"][0]["facets"].get("version")
            for e in run_events(settings, first.run_id)
            if e["eventType"] == "RUNNING"
        ),
        60,
        "a RUNNING event with the table's version",
    )
    for event in [e for e in run_events(settings, first.run_id) if e["outputs"][0]["facets"].get("version")]:
        assert_metrics_match_the_snapshot(spark, table, event["outputs"][0]["facets"])
        # ... and the snapshot the run's first commit built on: the table as the deployment found it.
        assert event["outputs"][0]["outputFacets"]["icebergSnapshot"].get("parentSnapshotId") == found
    assert marquez_state(settings, first.run_id) == "RUNNING"
    # While it runs, `lineage check` names its run as under way (a note with its age), not as left RUNNING.
    checked = subprocess.run(
        [sys.executable, "-m", "lineage_assets.cli", "lineage", "check"],
        env={**os.environ, **as_environment(settings)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [line for line in checked.stdout.splitlines() if first.run_id in line]
    assert lines and all(line.strip().startswith("note: run in progress: ") for line in lines), checked.stdout
    stored = marquez_events(settings, first.run_id)
    assert stored[0]["eventType"] == "START"
    assert len([e for e in stored if e["eventType"] == "RUNNING" and "streamingProgress" in e["run"]["facets"]]) >= 2

    # The supervisor reports each commit once; the asset sensor asks for supplier_stats of its days.
    import dagster as dg

    with dg.instance_for_test() as instance:
        definitions = build_definitions(environment)
        # A commit is readable in the table a moment before the runner records it: tick until ours is reported.
        commits, cursor = [], None

        def tick_reports_ours() -> bool:
            nonlocal cursor
            tick = evaluate_supervisor(environment, instance, cursor)
            commits.extend(e for e in tick.asset_events if isinstance(e, dg.AssetMaterialization))
            cursor = tick.cursor
            days = {d for c in commits for d in c.metadata["days"].data}
            return "2026-11-19" in days and sum(c.metadata["rows_out"].value for c in commits) >= len(ids)

        wait_for(tick_reports_ours, 60, "the supervisor to report the deployment's commits")
        assert all(c.metadata["deployment/run_id"].value == first.run_id for c in commits)
        assert all(
            "snapshot_id" in c.metadata and "quality" in c.metadata for c in commits if c.metadata["rows_out"].value
        )
        # Orders other tests left in the topic are ingested too: the days include at least ours.
        days = {d for c in commits for d in c.metadata["days"].data}
        assert "2026-11-19" in days
        assert [
            e
            for e in evaluate_supervisor(environment, instance, cursor).asset_events
            if isinstance(e, dg.AssetMaterialization)
        ] == []
        for commit in commits:
            instance.report_runless_asset_event(commit)
        with dg.build_sensor_context(instance=instance, definitions=definitions) as context:
            requests = (
                definitions.resolve_sensor_def("supplier_stats_on_new_orders").evaluate_tick(context).run_requests
            )
        assert {r.partition_key for r in requests} == days

    # A changed config drains the running deployment (COMPLETE) and starts it again from its checkpoint.
    changed = LocalDeployments(settings, running_interval=3, trigger_seconds=3)
    assert changed.deploy(NAME) == "restarted"
    drained = run_events(settings, first.run_id)
    assert drained[-1]["eventType"] == "COMPLETE"
    assert drained[-1]["run"]["facets"]["streamingProgress"]["processedRows"] >= len(ids)
    assert_metrics_match_the_snapshot(spark, table, drained[-1]["outputs"][0]["facets"])
    second = changed.status(NAME)
    assert second.running and second.run_id != first.run_id
    assert marquez_state(settings, first.run_id) == "COMPLETED"

    assert changed.stop(NAME) == "stopped"
    after = changed.status(NAME)
    assert not after.running and after.ended["state"] == "ABORT"
    assert processes_of(folder) == []
    states = [e["eventType"] for e in run_events(settings, second.run_id)]
    assert states[0] == "START" and states[-1] == "ABORT" and states.count("ABORT") == 1
    assert marquez_state(settings, second.run_id) == "ABORTED"
    assert ingested() == len(ids)  # the restart added no duplicate

    for event in run_events(settings, first.run_id) + run_events(settings, second.run_id):
        assert validate_event(event) == []


def assert_metrics_match_the_snapshot(spark, table: str, facets: dict) -> None:
    """The output's dataQualityMetrics describe the whole table as of the snapshot its version names."""
    snapshot = facets["version"]["datasetVersion"]
    row = spark.sql(
        f"SELECT count(*) AS n, count_if(price IS NULL) AS price_nulls, min(price) AS low, max(price) AS high "
        f"FROM {table} VERSION AS OF {snapshot}"
    ).collect()[0]
    metrics = facets["dataQualityMetrics"]
    assert metrics["rowCount"] == row.n and metrics["fileCount"] > 0 and metrics["bytes"] > 0
    assert metrics["columnMetrics"]["price"] == {
        "nullCount": row.price_nulls,
        "min": float(row.low),
        "max": float(row.high),
    }


def current_snapshot(spark, table: str) -> int | None:
    """The head of the table's main branch as committed now (None: no table, or no snapshot yet)."""
    if not spark.catalog.tableExists(table.replace("`", "")):
        return None
    spark.sql(f"REFRESH TABLE {table}")
    main = spark.sql(f"SELECT snapshot_id FROM {table}.refs WHERE name = 'main'").collect()
    return main[0].snapshot_id if main else None


def test_archive_and_live_deployments_name_the_files_and_offsets_they_wrote_as_they_run(stack, settings):
    """Each RUNNING event of a deployed archive names the files it added so far, each of them in the
    bucket with that size; each of a deployed live job the offsets it wrote to its topic so far."""
    own = pipeline_of_its_own(settings, "written")
    environment = orders_topic_ready(own)
    kafka = KafkaResource(environment=environment)
    kafka.ensure_topics(own.supplier_stats_topic)
    deployments = LocalDeployments(own, running_interval=3, trigger_seconds=2)
    runs = {}
    try:
        for dataset in (ARCHIVE, SUPPLIER_STATS_LIVE):
            assert deployments.deploy(dataset.key) == "started"
            runs[dataset.key] = deployments.status(dataset.key).run_id
        start = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=60)
        orders = list(generate_orders(GeneratorConfig(count=60, seed=77, start=start, late_fraction=0, bad_fraction=0)))
        produce_orders(orders, own)

        def latest_output(dataset, facet: str, field: str) -> dict | None:
            """The latest RUNNING event whose output ``facet`` names some ``field`` (files, partitions)."""
            running = [e for e in run_events(own, runs[dataset.key]) if e["eventType"] == "RUNNING"]
            found = [e for e in running if e["outputs"][0].get("outputFacets", {}).get(facet, {}).get(field)]
            return found[-1] if found else None

        archived = wait_for(lambda: latest_output(ARCHIVE, "filesWritten", "files"), 120, "a RUNNING event with files")
        published = wait_for(
            lambda: latest_output(SUPPLIER_STATS_LIVE, "kafkaOffsets", "partitions"),
            120,
            "a RUNNING event with offsets",
        )
    finally:
        for dataset in (ARCHIVE, SUPPLIER_STATS_LIVE):
            deployments.stop(dataset.key)
    for event in (archived, published):
        assert validate_event(event) == []
    files = archived["outputs"][0]["outputFacets"]["filesWritten"]["files"]
    bucket, prefix = own.archive_bucket, own.archive_prefix
    stored = {
        item["Key"][len(prefix) + 1 :]: item["Size"]
        for page in s3_client(own).get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{prefix}/")
        for item in page.get("Contents", [])
    }
    assert files and {f["path"]: f["size"] for f in files}.items() <= stored.items()
    offsets = published["outputs"][0]["outputFacets"]["kafkaOffsets"]
    end = kafka.end_offsets(own.supplier_stats_topic)
    assert offsets["topic"] == own.supplier_stats_topic
    assert offsets["partitions"] and all(
        0 == r["start"] < r["end"] <= end[r["partition"]] for r in offsets["partitions"]
    )


def evaluate_supervisor(environment, instance, cursor=None):
    import dagster as dg

    definitions = build_definitions(environment)
    sensor = definitions.resolve_sensor_def("streaming_deployments_supervisor")
    with dg.build_sensor_context(
        instance=instance,
        definitions=definitions,
        cursor=cursor,
        resources={name: definitions.resources[name] for name in ("environment", "kafka")},
    ) as context:
        return sensor.evaluate_tick(context)


def test_the_ui_job_deploys_and_stops_and_names_a_bad_action(environment, settings):
    import dagster as dg

    definitions = build_definitions(environment)
    job = definitions.resolve_job_def("streaming_deployments")

    def op_config(action: str) -> dict:
        config = {"action": action.upper(), "assets": ["orders_archive"], "running_interval": 3}
        return {"ops": {"manage_streaming_deployments": {"config": config}}}

    with dg.instance_for_test() as instance:
        with pytest.raises(dg.DagsterInvalidConfigError, match="action not in enum type DeploymentAction got EXPLODE"):
            job.execute_in_process(run_config=op_config("explode"), instance=instance)
        assert job.execute_in_process(run_config=op_config("deploy"), instance=instance).success
        deployments = LocalDeployments(settings, running_interval=3)
        assert deployments.status("orders_archive").running
        assert job.execute_in_process(run_config=op_config("drain"), instance=instance).success
    status = deployments.status("orders_archive")
    assert not status.running and status.ended["state"] == "COMPLETE"
    # Its end carries the metrics of what it archived (observed as written): every record has a key.
    (ended,) = [e for e in run_events(settings, status.run_id) if e["eventType"] == "COMPLETE"]
    metrics = ended["outputs"][0]["facets"]["dataQualityMetrics"]
    assert metrics["rowCount"] == ended["run"]["facets"]["streamingProgress"]["processedRows"]
    assert metrics["columnMetrics"]["key"]["nullCount"] == 0 and "bytes" not in metrics


def test_a_killed_deployment_ends_with_one_fail_and_its_opt_in_restart_resumes_from_the_checkpoint(
    environment, settings, spark
):
    import os
    import signal

    import dagster as dg

    deployments = LocalDeployments(settings, running_interval=3, trigger_seconds=2)
    table = iceberg_table_name(settings, "orders")
    orders = list(
        generate_orders(GeneratorConfig(count=40, seed=777, start=dt.datetime(2026, 11, 18, 9, tzinfo=dt.UTC)))
    )
    ids = [o.key for o in orders]

    def ingested() -> int:
        return rows_with_ids(spark, table, ids)

    assert deployments.deploy(NAME) in ("started", "restarted")
    killed = deployments.status(NAME)
    produce_orders(orders[:20], settings)

    with dg.instance_for_test() as instance:
        wait_for(lambda: ingested() >= 20, 180, "the first orders in Iceberg")
        wait_for(lambda: deployments.status(NAME).last_progress is not None, 60, "a progress report")
        running = evaluate_supervisor(environment, instance)
        observed = [e for e in running.asset_events if isinstance(e, dg.AssetObservation)]
        assert [o.asset_key for o in observed] == [dg.AssetKey(["lakehouse", "orders"])]
        assert observed[0].metadata["deployment/run_id"].value == killed.run_id
        assert observed[0].metadata["deployment/consumer_lag"].value >= 0

        killed_spark = (read_json(deployments.folder(NAME) / "runner.json") or {}).get("spark_pgid")
        os.kill(killed.pid, signal.SIGKILL)  # no chance to report anything
        wait_for(lambda: not deployments.status(NAME).running, 30, "the runner to be gone")
        # The opt-in restart: the tick that finds it dead ends its run with FAIL and redeploys it.
        restarting = SettingsResource(
            overrides={**as_environment(settings), "LINEAGE_ASSETS_RESTART_DEAD_DEPLOYMENTS": "on"}
        )
        evaluate_supervisor(restarting, instance)
        failed = [e for e in run_events(settings, killed.run_id) if e["eventType"] == "FAIL"]
        (error,) = [e["run"]["facets"]["errorMessage"] for e in failed]
        assert "runner process is gone" in error["message"] and error["stackTrace"]  # the job's last lines
        assert marquez_state(settings, killed.run_id) == "FAILED"
        restarted = deployments.status(NAME)
        assert restarted.running and restarted.run_id != killed.run_id
        assert killed_spark and killed_spark not in processes_of(deployments.folder(NAME)), (
            "the orphan is stopped first"
        )

        evaluate_supervisor(environment, instance)  # a second pass emits nothing more for the dead run
        assert (
            len([e for e in run_events(settings, killed.run_id) if e["eventType"] in ("FAIL", "ABORT", "COMPLETE")])
            == 1
        )

    # The new run resumes from the checkpoint: every order once, none twice.
    produce_orders(orders[20:], settings)
    wait_for(lambda: ingested() >= len(ids), 180, "the remaining orders in Iceberg")
    assert deployments.stop(NAME, drain=True) == "stopped"
    assert ingested() == len(ids)
    assert deployments.status(NAME).ended["state"] == "COMPLETE"
    assert [e["eventType"] for e in run_events(settings, restarted.run_id)][0] == "START"


def test_a_deployment_whose_job_dies_ends_with_fail_and_the_error(environment, settings):
    broken = dataclasses.replace(settings, catalog_url="http://127.0.0.1:9")
    deployments = LocalDeployments(broken, running_interval=3)
    assert deployments.deploy(NAME) in ("started", "restarted")
    run_id = deployments.status(NAME).run_id
    wait_for(lambda: not deployments.status(NAME).running, 180, "the broken deployment to die")
    assert deployments.status(NAME).ended["state"] == "FAIL"
    events = run_events(settings, run_id)
    assert [e["eventType"] for e in events][0] == "START" and events[-1]["eventType"] == "FAIL"
    message = events[-1]["run"]["facets"]["errorMessage"]["message"]
    assert "exited with code" in message and "127.0.0.1:9" in message
    assert marquez_state(settings, run_id) == "FAILED"


def test_a_version_registered_while_the_ingestion_runs_is_read_by_its_next_batch(stack, settings, spark):
    """Another team's producer adds an optional field mid-stream and registers it on first use: the
    running deployment reads those records into the table (it asks the registry at each micro-batch),
    dead-letters none and needs no restart. On topics of its own, so the shared subject keeps one version."""
    own = pipeline_of_its_own(settings, "new-version")
    environment = orders_topic_ready(own)
    deployments = LocalDeployments(own, running_interval=3, trigger_seconds=2)
    table = iceberg_table_name(own, "orders")
    orders = list(
        generate_orders(GeneratorConfig(count=40, seed=4242, start=dt.datetime(2026, 11, 18, 11, tzinfo=dt.UTC)))
    )
    first, later = orders[:20], orders[20:]
    with_currency = copy.deepcopy(ORDERS_AVRO_SCHEMA)
    with_currency["fields"].append({"name": "currency", "type": ["null", "string"], "default": None})

    produce_orders(first, own)
    assert deployments.deploy(NAME) == "started"
    try:
        wait_for(
            lambda: rows_with_ids(spark, table, [o.key for o in first]) == len(first),
            180,
            "the first orders in Iceberg",
        )
        produce_orders(
            [dataclasses.replace(o, order={**o.order, "currency": "EUR"}) for o in later],
            own,
            value_schema=json.dumps(with_currency),
        )
        wait_for(
            lambda: rows_with_ids(spark, table, [o.key for o in later]) == len(later),
            120,
            "the new version's orders in Iceberg",
        )
    finally:
        assert deployments.stop(NAME, drain=True) == "stopped"
    assert deployments.status(NAME).ended["state"] == "COMPLETE"
    assert sum(KafkaResource(environment=environment).end_offsets(own.dead_letter_topic).values()) == 0

"""The lakehouse tables' upkeep on the real catalog: the `lakehouse_maintenance` job compacts the
small files of `orders`' closed days, expires old snapshots and deletes the files of failed writes
through Iceberg's own procedures, keeps the newest and the data, and stops the metadata files of a
table made before that was a table's default from piling up; a day read after its compaction is
still traced to the ingestion runs that wrote it, in the log and in Marquez."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import threading
import time

import dagster as dg

from lineage_assets.assets.common import asset_key
from lineage_assets.connections import s3_client
from lineage_assets.datasets import LAKEHOUSE_ORDERS, SUPPLIER_STATS, iceberg_table_name
from lineage_assets.definitions import build_definitions
from lineage_assets.generator import GeneratorConfig, generate_orders, produce_orders
from lineage_assets.job_specs import table_columns
from lineage_assets.lineage.emitter import emitter_for
from lineage_assets.lineage.marquez import MarquezApi
from lineage_assets.lineage.provenance import provenance
from lineage_assets.lineage.run_records import marquez_runs, runs_of
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.stack.services.storage import S3
from lineage_assets.streaming.deployments import LocalDeployments
from lineage_assets.testing import pipeline_of_its_own
from spark.support.tables import METADATA_PROPERTIES, files_under
from tests.conftest import wait_for
from tests.e2e.conftest import DELIVERY_TIMEOUT_S
from tests.integration.test_deployments import (
    assert_metrics_match_the_snapshot,
    orders_topic_ready,
    rows_and_orders,
    run_events,
)
from tests.provenance_checks import offsets_behind, recomputed_day, without_times, written_day

KEPT = 5  # LINEAGE_ASSETS_SNAPSHOTS_KEPT of the probe: a dozen commits more than it keeps
COMMITS = KEPT + 12


def metadata_files(spark, table: str) -> int:
    location = spark.sql(f"DESCRIBE TABLE EXTENDED {table}").where("col_name = 'Location'").first().data_type
    return sum(name.endswith(".metadata.json") for name in files_under(spark, f"{location}/metadata"))


def test_the_upkeep_packs_a_closed_days_files_expires_all_but_the_newest_snapshots_and_keeps_every_row(
    stack, settings, spark
):
    # A namespace of its own, with every snapshot older than the retention: only the newest KEPT stay.
    probe = dataclasses.replace(
        settings, iceberg_namespace="maintenance_probe", snapshot_retention_hours=0, snapshots_kept=KEPT
    )
    table = iceberg_table_name(probe, "orders")
    spark.sql(f"DROP TABLE IF EXISTS {table} PURGE")
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {probe.catalog_name}.`{probe.iceberg_namespace}`")
    # As an earlier version of the project made it: without METADATA_PROPERTIES, every metadata file kept
    # (its log of KEPT entries, against Iceberg's 100 by default, fills with these few commits).
    spark.sql(
        f"CREATE TABLE {table} ({table_columns(LAKEHOUSE_ORDERS)}) USING iceberg PARTITIONED BY (days(bid_time)) "
        f"TBLPROPERTIES ('write.metadata.previous-versions-max' = '{KEPT}')"
    )
    for commit in range(COMMITS):
        spark.sql(
            f"INSERT INTO {table} VALUES ('o-{commit}', 'lamp', 1.50, 'Alice', TIMESTAMP_NTZ '2026-11-20 10:00:00')"
        )
    current = spark.sql(f"SELECT snapshot_id FROM {table}.refs WHERE name = 'main'").first().snapshot_id
    assert metadata_files(spark, table) == COMMITS + 1

    job = build_definitions(SettingsResource.of(probe)).resolve_job_def("lakehouse_maintenance")
    result = job.execute_in_process()

    assert result.success
    upkeep = result.output_for_node("lakehouse_upkeep")
    (expired,) = upkeep["expired"]  # supplier_stats is not there: skipped
    (compacted,) = upkeep["compacted"]  # a file per commit, all in a day before today: packed into one
    assert (compacted["rewritten_data_files_count"], compacted["added_data_files_count"]) == (COMMITS, 1)
    assert (expired["table"], expired["snapshots_before"], expired["snapshots_after"]) == (
        table,
        COMMITS + 1,  # the compaction's own
        KEPT,
    )
    assert expired["current_snapshot_id"] == compacted["current_snapshot_id"] != current
    assert expired["deleted_manifest_lists_count"] == COMMITS + 1 - KEPT
    assert upkeep["orphans"] == [  # every file just written, unreferenced or not, is younger than the orphan age
        {"table": table, "older_than": upkeep["orphans"][0]["older_than"], "deleted_orphan_files": []}
    ]
    spark.catalog.refreshTable(table)
    assert spark.table(f"{table}.snapshots").count() == KEPT
    assert spark.table(table).count() == COMMITS  # no data changes
    # From now on the table deletes the metadata file its log lets go at each commit: no more pile up.
    properties = {row.key: row.value for row in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}
    assert METADATA_PROPERTIES.items() <= properties.items()
    before = metadata_files(spark, table)
    for commit in range(3):
        spark.sql(
            f"INSERT INTO {table} VALUES ('o-{commit}', 'lamp', 1.50, 'Bob', TIMESTAMP_NTZ '2026-11-20 11:00:00')"
        )
    assert metadata_files(spark, table) == before


def test_the_upkeep_deletes_the_files_nothing_references_once_past_the_orphan_age_and_keeps_the_rest(
    stack, settings, spark
):
    """The files a failed write left (a data file and its commit's manifest list) and the metadata files
    a table made without METADATA_PROPERTIES kept beyond its log go once older than
    LINEAGE_ASSETS_ORPHAN_FILE_AGE_HOURS; a younger unreferenced file, as a write still in flight has,
    stays, and so does every file the table references, however old."""
    probe = dataclasses.replace(settings, iceberg_namespace="orphans_probe", orphan_file_age_hours=72)
    table = iceberg_table_name(probe, "orders")
    spark.sql(f"DROP TABLE IF EXISTS {table} PURGE")
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {probe.catalog_name}.`{probe.iceberg_namespace}`")
    # A metadata log of one earlier file, none deleted: the table's first metadata files fall out of it.
    spark.sql(
        f"CREATE TABLE {table} ({table_columns(LAKEHOUSE_ORDERS)}) USING iceberg PARTITIONED BY (days(bid_time)) "
        "TBLPROPERTIES ('write.metadata.previous-versions-max' = '1')"
    )
    for commit in range(3):
        spark.sql(
            f"INSERT INTO {table} VALUES ('o-{commit}', 'lamp', 1.50, 'Alice', TIMESTAMP_NTZ '2026-11-20 10:00:00')"
        )
    location = spark.sql(f"DESCRIBE TABLE EXTENDED {table}").where("col_name = 'Location'").first().data_type
    bucket, prefix = location.split("://", 1)[1].split("/", 1)
    logged = {
        row.file.split("://", 1)[1] for row in spark.sql(f"SELECT file FROM {table}.metadata_log_entries").collect()
    }
    past_the_log = [
        f"{prefix}/metadata/{name}"
        for name in files_under(spark, f"{location}/metadata")
        if name.endswith(".metadata.json") and f"{bucket}/{prefix}/metadata/{name}" not in logged
    ]
    assert len(past_the_log) == 2  # of 4: the current one and the one before it are in the log
    failed_write = [
        f"{prefix}/data/bid_time_day=2026-11-20/00000-7-failed-00001.parquet",
        f"{prefix}/metadata/snap-7-failed.avro",
    ]
    in_flight = f"{prefix}/data/bid_time_day=2026-11-20/00000-8-in-flight-00001.parquet"
    client = s3_client(probe)
    for key in (*failed_write, in_flight):
        client.put_object(Bucket=bucket, Key=key, Body=b"PAR1")
    # The store's clock cannot be turned, so its files are dated back (s3proxy reports a file's mtime).
    blobs = S3.data_dir(probe) / "blobs" / bucket

    def date_back(path, hours: float) -> None:
        os.utime(path, (time.time() - hours * 3600,) * 2)

    for path in (blobs / prefix).rglob("*"):
        if path.is_file():
            date_back(path, 96)
    date_back(blobs / in_flight, probe.orphan_file_age_hours - 1)

    result = build_definitions(SettingsResource.of(probe)).resolve_job_def("lakehouse_maintenance").execute_in_process()

    assert result.success
    (orphans,) = result.output_for_node("lakehouse_upkeep")["orphans"]
    assert orphans["table"] == table
    orphaned = [*failed_write, *past_the_log]
    assert orphans["deleted_orphan_files"] == sorted(f"{location.split('://')[0]}://{bucket}/{key}" for key in orphaned)
    left = {item["Key"] for item in client.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/")["Contents"]}
    assert in_flight in left and not left & set(orphaned)
    (output,) = [event for event in result.all_node_events if event.is_successful_output]
    assert output.step_output_data.metadata[f"orphans_deleted/{table}"].value == len(orphaned)
    spark.catalog.refreshTable(table)
    assert sorted(row.order_id for row in spark.table(table).collect()) == ["o-0", "o-1", "o-2"]
    assert spark.table(f"{table}.snapshots").count() == 3  # younger than the retention: every one kept


DAY = dt.date(2026, 11, 20)
INGESTIONS = 3


def test_a_compacted_day_reads_the_same_and_is_still_traced_to_the_ingestion_runs_that_wrote_it(stack, settings, spark):
    """Three catch-up ingestions leave a file per Kafka partition each in one closed day; the upkeep
    packs them into one (a `replace` snapshot no run reports), and the day's `supplier_stats`,
    computed from that snapshot, is traced through it to the three runs and the offsets they read,
    whose records give its totals again."""
    own = dataclasses.replace(pipeline_of_its_own(settings, "compaction"), orders_partitions=3)
    environment = orders_topic_ready(own)
    definitions = build_definitions(environment)
    assets, instance = [*definitions.assets, *definitions.asset_checks], dg.DagsterInstance.ephemeral()
    table = iceberg_table_name(own, "orders")
    ingestions = []
    for seed in range(INGESTIONS):
        start = dt.datetime.combine(DAY, dt.time(10 + seed), tzinfo=dt.UTC)
        orders = generate_orders(GeneratorConfig(count=30, seed=seed, start=start))
        produce_orders(list(orders), own)
        ingestions.append(
            dg.materialize(
                assets, selection=[asset_key(LAKEHOUSE_ORDERS)], resources=definitions.resources, instance=instance
            ).run_id
        )
    spark.catalog.refreshTable(table)
    small_files = spark.table(f"{table}.files").count()
    ingested = spark.sql(f"SELECT snapshot_id FROM {table}.refs WHERE name = 'main'").first().snapshot_id
    assert small_files >= 5  # what rewrite_data_files packs by default

    result = definitions.resolve_job_def("lakehouse_maintenance").execute_in_process(instance=instance)

    (compacted,) = result.output_for_node("lakehouse_upkeep")["compacted"]
    assert (compacted["rewritten_data_files_count"], compacted["added_data_files_count"]) == (small_files, 1)
    spark.catalog.refreshTable(table)
    assert spark.table(f"{table}.files").count() == 1
    current = spark.sql(f"SELECT snapshot_id, parent_id, operation FROM {table}.snapshots ORDER BY committed_at DESC")
    assert current.first().asDict() == {
        "snapshot_id": compacted["current_snapshot_id"],
        "parent_id": ingested,
        "operation": "replace",
    }

    dg.materialize(
        assets,
        selection=[asset_key(SUPPLIER_STATS)],
        partition_key=DAY.isoformat(),
        resources=definitions.resources,
        instance=instance,
    )
    # On the partition's page in Dagster: the snapshot read, whose rows it holds, and the ingestion run that wrote them.
    stats_metadata = instance.get_latest_materialization_event(asset_key(SUPPLIER_STATS)).asset_materialization.metadata
    assert stats_metadata[f"read/{LAKEHOUSE_ORDERS.key}"].value == {
        "snapshot_id": str(compacted["current_snapshot_id"]),
        "schema_id": 0,
        "data_snapshot_id": str(ingested),
    }
    assert stats_metadata[f"read/{LAKEHOUSE_ORDERS.key}/written_by"].value == f"{own.dagster_url}/runs/{ingestions[-1]}"
    answer = provenance(runs_of(emitter_for(own).events()), SUPPLIER_STATS, own, partition=DAY.isoformat()).as_dict()
    (stats,) = answer["made_by"]
    (read,) = stats["read"]
    assert (read["version"], read["data_version"]) == (str(compacted["current_snapshot_id"]), str(ingested))
    assert [step["job"] for step in read["made_by"]] == [
        f"{own.lineage_namespace}/{LAKEHOUSE_ORDERS.job.lineage_name}"
    ] * INGESTIONS
    ranges = offsets_behind(answer)
    assert sum(r["end"] - r["start"] for r in ranges) == 30 * INGESTIONS
    assert recomputed_day(spark, own, ranges, DAY.isoformat()) == written_day(
        spark, own, stats["wrote"]["version"], DAY.isoformat()
    )

    assert emitter_for(own).flush(timeout=DELIVERY_TIMEOUT_S), "the event log was not delivered to Marquez"
    shown = provenance(marquez_runs(MarquezApi.of(own), own), SUPPLIER_STATS, own, partition=DAY.isoformat())
    assert without_times(shown.as_dict()) == without_times(answer)


def test_the_upkeep_compacts_while_a_deployment_appends_and_no_order_is_lost_or_doubled(stack, settings, spark):
    """A deployment commits a closed day's orders, then keeps committing today's while the upkeep
    compacts that day: Iceberg commits both (an append does not conflict with a rewrite), every order
    is in the table once, and the deployment's next events report the table as it is."""
    own = dataclasses.replace(pipeline_of_its_own(settings, "compaction-live"), orders_partitions=3)
    orders_topic_ready(own)
    table = iceberg_table_name(own, "orders")
    produced: list[str] = []

    def produce(count: int, seed: int, start: dt.datetime) -> None:
        orders = list(generate_orders(GeneratorConfig(count=count, seed=seed, start=start)))
        produce_orders(orders, own)
        produced.extend(order.key for order in orders)

    def all_once() -> bool:
        return rows_and_orders(spark, table, produced) == (len(produced), len(produced))

    deployments = LocalDeployments(own, running_interval=3, trigger_seconds=1)
    assert deployments.deploy(LAKEHOUSE_ORDERS.key) == "started"
    run_id = deployments.status(LAKEHOUSE_ORDERS.key).run_id
    try:
        for seed in range(2):  # a commit each: a file per Kafka partition each, in the closed day
            produce(30, seed, dt.datetime.combine(DAY, dt.time(10 + seed), tzinfo=dt.UTC))
            wait_for(all_once, 180, "the deployment to commit the closed day's orders")
        spark.catalog.refreshTable(table)
        closed_files = spark.table(f"{table}.files").count()
        assert closed_files >= 5

        stop = threading.Event()

        def keep_producing() -> None:
            seed = 100
            while not stop.is_set():
                produce(10, seed, dt.datetime.now(dt.UTC) - dt.timedelta(seconds=10))
                seed += 1
                time.sleep(0.5)

        producer = threading.Thread(target=keep_producing)
        producer.start()
        try:
            job = build_definitions(SettingsResource.of(own)).resolve_job_def("lakehouse_maintenance")
            result = job.execute_in_process()
        finally:
            stop.set()
            producer.join()

        (compacted,) = result.output_for_node("lakehouse_upkeep")["compacted"]
        assert (compacted["rewritten_data_files_count"], compacted["added_data_files_count"]) == (closed_files, 1)
        wait_for(all_once, 180, "every order produced during the upkeep, once")
        operations = [row.operation for row in spark.sql(f"SELECT operation FROM {table}.snapshots").collect()]
        assert "replace" in operations and operations.count("append") >= 3  # the deployment committed on after
        assert deployments.status(LAKEHOUSE_ORDERS.key).running

        # Its events after the compaction: the table's metrics as of the snapshot each names.
        def reported_after_compaction() -> dict | None:
            spark.catalog.refreshTable(table)
            later = {  # the snapshots committed after the compaction's
                str(row.snapshot_id)
                for row in spark.sql(
                    f"SELECT snapshot_id FROM {table}.snapshots WHERE committed_at > "
                    f"(SELECT committed_at FROM {table}.snapshots WHERE operation = 'replace')"
                ).collect()
            }
            versions = [
                e["outputs"][0]["facets"]
                for e in run_events(own, run_id)
                if e["eventType"] == "RUNNING"
                and (e["outputs"][0]["facets"].get("version") or {}).get("datasetVersion") in later
            ]
            return versions[-1] if versions else None

        assert_metrics_match_the_snapshot(
            spark, table, wait_for(reported_after_compaction, 60, "a RUNNING event after the compaction")
        )
    finally:
        deployments.stop(LAKEHOUSE_ORDERS.key)

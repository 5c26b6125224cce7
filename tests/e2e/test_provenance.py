"""What each run read and wrote, as versions: the offsets of `orders` every streaming job consumed,
the snapshot of `lakehouse/orders` each `supplier_stats` run read, the offsets live windows wrote and
the files the archive added, held against Kafka, Iceberg and S3 themselves."""

from __future__ import annotations

import pytest

from lineage_assets.assets.common import asset_key
from lineage_assets.assets.run_lineage import dagster_run_of
from lineage_assets.connections import s3_client
from lineage_assets.datasets import (
    ARCHIVE,
    LAKEHOUSE_ORDERS,
    ORDERS,
    SUPPLIER_STATS,
    SUPPLIER_STATS_LIVE,
    iceberg_table_name,
)
from lineage_assets.lineage.emitter import emitter_for
from lineage_assets.lineage.facets import PRODUCER
from lineage_assets.lineage.provenance import provenance, reached
from lineage_assets.lineage.run_records import marquez_runs, runs_of
from lineage_assets.resources.kafka import KafkaResource
from lineage_assets.resources.settings import SettingsResource
from tests.e2e.conftest import GENERATOR
from tests.provenance_checks import completed, offsets_behind, recomputed_day, without_times, written_day
from tests.suite import SHARED_PIPELINE

pytestmark = pytest.mark.xdist_group(SHARED_PIPELINE)  # the test stack's own topics, tables and lineage


def read_of(event: dict, dataset, settings) -> dict:
    (read,) = [i for i in event["inputs"] if (i["namespace"], i["name"]) == dataset.identity(settings).node]
    return read


def test_each_streaming_job_consumes_orders_once_each_run_starting_where_the_last_ended(runs, settings):
    kafka = KafkaResource(environment=SettingsResource.of(settings))
    end = {partition: offset for partition, offset in kafka.end_offsets(settings.orders_topic).items() if offset}
    for dataset in (ARCHIVE, SUPPLIER_STATS_LIVE, LAKEHOUSE_ORDERS):
        runs_of_job = completed(settings, dataset)
        first = read_of(runs_of_job[0], ORDERS, settings)["inputFacets"]["kafkaOffsets"]
        assert first["topic"] == settings.orders_topic
        assert sum(r["end"] - r["start"] for r in first["partitions"]) == GENERATOR.count, dataset.key
        consumed: dict[int, int] = {}
        for event in runs_of_job:
            for offsets in (
                read_of(event, ORDERS, settings)["inputFacets"].get("kafkaOffsets", {}).get("partitions", [])
            ):
                assert offsets["start"] == consumed.get(offsets["partition"], 0), (dataset.key, offsets)
                consumed[offsets["partition"]] = offsets["end"]
        assert all(offset <= end[partition] for partition, offset in consumed.items()), dataset.key  # what it holds


def test_supplier_stats_reads_the_snapshot_the_ingestion_wrote_last_and_overwrites_a_day_it_wrote(
    runs, settings, spark
):
    snapshots = {
        str(row.snapshot_id)
        for row in spark.sql(f"SELECT snapshot_id FROM {iceberg_table_name(settings, 'orders')}.snapshots").collect()
    }
    written, days = None, set()  # the last snapshot the ingestion wrote; the days it wrote rows into
    checked = 0
    for event in emitter_for(settings).events():
        if event["producer"] != PRODUCER or event["eventType"] != "COMPLETE":
            continue
        if event["job"]["name"] == LAKEHOUSE_ORDERS.job.lineage_name:
            written = event["outputs"][0]["facets"]["version"]["datasetVersion"]
            days |= set(event["outputs"][0]["outputFacets"].get("partitionsWritten", {}).get("partitions", []))
        elif event["job"]["name"] == SUPPLIER_STATS.job.lineage_name:
            read = read_of(event, LAKEHOUSE_ORDERS, settings)
            assert read["facets"]["version"]["datasetVersion"] == written and written in snapshots
            assert str(read["inputFacets"]["icebergSnapshot"]["snapshotId"]) == written
            (day,) = event["outputs"][0]["outputFacets"]["partitionsWritten"]["partitions"]  # the day it overwrote
            assert day in days
            checked += 1
    assert checked


def test_a_supplier_stats_partition_links_in_dagster_the_ingestion_run_that_made_the_snapshot_it_read(
    runs, settings, instance
):
    """On the asset's page, a partition names the snapshot it read and links the ingestion run whose
    lineage says it wrote that snapshot (the second pass's ingestion wrote nothing and is not it)."""
    stats = instance.get_latest_materialization_event(asset_key(SUPPLIER_STATS)).asset_materialization.metadata
    read = stats[f"read/{LAKEHOUSE_ORDERS.key}"].value["snapshot_id"]
    made = [
        event["run"]["facets"]["parent"]["run"]["runId"]
        for event in completed(settings, LAKEHOUSE_ORDERS)
        if event["outputs"][0]["outputFacets"]["icebergSnapshot"]["snapshotId"] == int(read)
        and event["outputs"][0]["outputFacets"]["icebergSnapshot"].get("parentSnapshotId") != int(read)
    ]
    (lineage_parent,) = made
    dagster_run = next(
        r for r in instance.get_runs() if dagster_run_of(instance, r.run_id).lineage_run_id == lineage_parent
    )
    assert stats[f"read/{LAKEHOUSE_ORDERS.key}/written_by"].value == f"{settings.dagster_url}/runs/{dagster_run.run_id}"


def test_live_windows_name_the_offsets_they_wrote_and_the_archive_the_files_it_added(runs, settings):
    kafka = KafkaResource(environment=SettingsResource.of(settings))
    (live, *_) = completed(settings, SUPPLIER_STATS_LIVE)
    written = live["outputs"][0]["outputFacets"]["kafkaOffsets"]
    assert written["topic"] == settings.supplier_stats_topic
    windows = live["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"]
    assert sum(r["end"] - r["start"] for r in written["partitions"]) == windows > 0
    topic_end = kafka.end_offsets(settings.supplier_stats_topic)
    assert all(r["end"] <= topic_end[r["partition"]] for r in written["partitions"])

    (archived, *_) = completed(settings, ARCHIVE)
    files = archived["outputs"][0]["outputFacets"]["filesWritten"]["files"]
    assert len(files) == archived["outputs"][0]["outputFacets"]["outputStatistics"]["fileCount"] > 0
    bucket, prefix = settings.archive_bucket, settings.archive_prefix
    stored = {
        item["Key"].removeprefix(f"{prefix}/"): item["Size"]
        for page in s3_client(settings).get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        for item in page.get("Contents", [])
    }
    assert {f["path"]: f["size"] for f in files}.items() <= stored.items()


def test_a_days_provenance_leads_to_offsets_whose_records_recompute_its_totals(runs, settings, spark):
    """The provenance of the day `supplier_stats` computed last names the ingestion runs that wrote
    that day up to the snapshot it read and the offsets of `orders` they read; those records, read
    again from Kafka and put through the jobs' own transforms, give that day's totals to the cent."""
    (last, *_) = reversed(completed(settings, SUPPLIER_STATS))
    (day,) = last["outputs"][0]["outputFacets"]["partitionsWritten"]["partitions"]
    answer = provenance(runs_of(emitter_for(settings).events()), SUPPLIER_STATS, settings, partition=day).as_dict()
    (stats,) = answer["made_by"]
    (table,) = stats["read"]
    ingestions = table["made_by"]
    assert ingestions and {step["job"].split("/")[1] for step in ingestions} == {LAKEHOUSE_ORDERS.job.lineage_name}
    assert table["version"] == ingestions[-1]["wrote"]["version"] and all(
        day in step["wrote"]["partitions"] for step in ingestions
    )

    ranges = offsets_behind(answer)
    assert ranges
    assert recomputed_day(spark, settings, ranges, day) == written_day(spark, settings, stats["wrote"]["version"], day)


def test_marquez_gives_the_provenance_and_the_reach_the_log_gives(marquez, settings):
    log, shown = runs_of(emitter_for(settings).events()), marquez_runs(marquez, settings)
    (last, *_) = reversed(completed(settings, SUPPLIER_STATS))
    (day,) = last["outputs"][0]["outputFacets"]["partitionsWritten"]["partitions"]
    from_log = provenance(log, SUPPLIER_STATS, settings, partition=day).as_dict()
    assert without_times(provenance(shown, SUPPLIER_STATS, settings, partition=day).as_dict()) == without_times(
        from_log
    )
    (first_ingestion, *_) = completed(settings, LAKEHOUSE_ORDERS)
    run_id = first_ingestion["run"]["runId"]
    assert reached(shown, run_id, settings).as_dict() == reached(log, run_id, settings).as_dict()
    assert reached(log, run_id, settings).partitions()[SUPPLIER_STATS.key]

"""Provenance held against the data: the runs a log says completed, and a `supplier_stats` day
computed again from the records its provenance names (the offsets of `orders` the ingestion runs
behind it read, re-read from Kafka and put through the jobs' own transforms as the code stands)."""

from __future__ import annotations

import datetime as dt
import json

from lineage_assets.connections import registry_client_conf, spark_kafka_conf
from lineage_assets.datasets import Dataset, iceberg_table_name, orders_reader_schema_json
from lineage_assets.lineage.emitter import emitter_for
from lineage_assets.lineage.facets import PRODUCER
from lineage_assets.settings import Settings
from lineage_assets.source_schemas import registered_versions, value_subject
from spark import transforms

STATS_COLUMNS = ["supplier", "bid_hour", "total_price", "total_count"]


def completed(settings: Settings, dataset: Dataset) -> list[dict]:
    """The COMPLETE events of the project's runs of ``dataset``'s job, oldest first."""
    return [
        event
        for event in emitter_for(settings).events()
        if event["job"]["name"] == dataset.job.lineage_name
        and event["producer"] == PRODUCER
        and event["eventType"] == "COMPLETE"
    ]


def offsets_behind(answer: dict) -> list[dict]:
    """The offset ranges of `orders` read by the runs that made what a `supplier_stats` answer read."""
    (stats,) = answer["made_by"]
    return [
        r
        for table in stats["read"]
        for step in table["made_by"]
        for read in step["read"]
        for r in read.get("offsets", [])
    ]


def recomputed_day(spark, settings: Settings, ranges: list[dict], day: str) -> list:
    topic = settings.orders_topic
    raw = None
    for r in ranges:
        part = (
            spark.read.format("kafka")
            .options(**spark_kafka_conf(settings))
            .option("assign", json.dumps({topic: [r["partition"]]}))  # that partition alone, of however many
            .option("startingOffsets", json.dumps({topic: {str(r["partition"]): r["start"]}}))
            .option("endingOffsets", json.dumps({topic: {str(r["partition"]): r["end"]}}))
            .load()
        )
        raw = part if raw is None else raw.unionByName(part)
    reader = orders_reader_schema_json()
    versions = registered_versions(registry_client_conf(settings), value_subject(topic), reader)
    valid = transforms.valid_records(transforms.decode_orders(raw, reader, versions))
    stats = transforms.hourly_supplier_stats(
        transforms.orders_of_day(transforms.iceberg_orders(valid), dt.date.fromisoformat(day))
    )
    return sorted(stats.select(STATS_COLUMNS).collect())


def written_day(spark, settings: Settings, version: str, day: str) -> list:
    """The day's rows of `supplier_stats` at one of its snapshots."""
    table = iceberg_table_name(settings, "supplier_stats")
    written = spark.sql(f"SELECT * FROM {table} VERSION AS OF {version}").where(f"bid_date = DATE'{day}'")
    return sorted(written.select(STATS_COLUMNS).collect())


def without_times(answer: dict) -> dict:
    """``answer`` without its runs' times (the log's are its events' times, Marquez's its runs' own)."""
    return {
        key: [without_times(item) if isinstance(item, dict) else item for item in value]
        if isinstance(value, list)
        else without_times(value)
        if isinstance(value, dict)
        else value
        for key, value in answer.items()
        if key != "time"
    }

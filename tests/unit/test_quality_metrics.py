"""The jobs' ``quality`` report entries: Iceberg tables from their manifests, a streaming sink from
its observed batches."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from decimal import Decimal

import pytest
from pyspark.sql import Observation, Row
from pyspark.sql.types import DecimalType, StringType, StructField, StructType

from spark.ingest_orders import CommittedTable
from spark.support import quality, tables

COLUMNS = ["order_id", "price"]


def totals(**changes) -> dict:
    """One row of ``files_quality``'s totals: two data files, 5 rows."""
    return {
        "delete_files": 0,
        "files": 2,
        "rows": 5,
        "bytes": 3000,
        "order_id:nulls": 0,
        "order_id:counted": 2,
        "price:nulls": 1,
        "price:counted": 2,
        "price:min": Decimal("1.50"),
        "price:max": Decimal("99.99"),
        "price:unbounded": 0,
        **changes,
    }


def test_table_totals_become_rows_bytes_files_and_column_metrics():
    assert quality.table_quality_entry(totals(), COLUMNS) == {
        "rows": 5,
        "bytes": 3000,
        "files": 2,
        "columns": {"order_id": {"nulls": 0}, "price": {"nulls": 1, "min": 1.5, "max": 99.99}},
    }


def test_nulls_are_left_out_unless_every_file_counted_them():
    entry = quality.table_quality_entry(totals(**{"price:nulls": 0, "price:counted": 1}), COLUMNS)
    assert entry["columns"]["price"] == {"min": 1.5, "max": 99.99}


def test_bounds_are_left_out_when_a_file_with_values_has_none():
    entry = quality.table_quality_entry(
        totals(**{"price:unbounded": 1}), COLUMNS
    )  # e.g. written with metrics mode `counts`
    assert entry["columns"]["price"] == {"nulls": 1}


def test_an_empty_table_has_zero_rows_and_no_bounds():
    empty = totals(
        files=0,
        rows=None,
        bytes=None,
        **{
            "order_id:nulls": None,
            "order_id:counted": 0,
            "price:nulls": None,
            "price:counted": 0,
            "price:min": None,
            "price:max": None,
        },
    )
    assert quality.table_quality_entry(empty, COLUMNS) == {
        "rows": 0,
        "bytes": 0,
        "files": 0,
        "columns": {"order_id": {"nulls": 0}, "price": {"nulls": 0}},
    }


def test_a_table_with_delete_files_has_no_metrics():
    assert (
        quality.table_quality_entry(totals(delete_files=1), COLUMNS) is None
    )  # its data files' counts include deleted rows


def test_an_iceberg_tables_metrics_come_from_its_files_metadata_table(spark, tmp_path):
    spark.conf.set("spark.sql.catalog.quality_test", "org.apache.iceberg.spark.SparkCatalog")
    spark.conf.set("spark.sql.catalog.quality_test.type", "hadoop")
    spark.conf.set("spark.sql.catalog.quality_test.warehouse", tmp_path.as_uri())
    table = "quality_test.db.orders"
    spark.sql(f"""CREATE TABLE {table} (order_id STRING, price DECIMAL(10,2), bid_time TIMESTAMP_NTZ, bid_hour INT)
                  USING iceberg PARTITIONED BY (days(bid_time))""")
    assert tables.table_quality(spark, table, None) == {  # no snapshot yet: empty
        "rows": 0,
        "bytes": 0,
        "files": 0,
        "columns": {name: {"nulls": 0} for name in ("order_id", "price", "bid_time", "bid_hour")},
    }
    spark.sql(f"""INSERT INTO {table} VALUES ('a', 1.50, TIMESTAMP_NTZ'2026-11-20 23:59:00', 23),
                  ('b', 99.99, TIMESTAMP_NTZ'2026-11-21 00:01:00', 0),
                  ('c', NULL, TIMESTAMP_NTZ'2026-11-22 00:02:00', 0)""")
    snapshot = spark.sql(f"SELECT snapshot_id FROM {table}.snapshots").collect()[-1].snapshot_id
    spark.sql(f"INSERT INTO {table} VALUES ('d', 5.00, TIMESTAMP_NTZ'2026-11-23 00:00:00', 0)")  # after the snapshot

    entry = tables.table_quality(spark, table, snapshot)
    files = spark.sql(f"SELECT file_size_in_bytes FROM {table}.files VERSION AS OF {snapshot}").collect()
    # One file per day; the 22nd's has no price bounds (its one price is null), which leaves the bounds exact.
    assert (entry["rows"], entry["files"], entry["bytes"]) == (3, 3, sum(f.file_size_in_bytes for f in files))
    assert entry["columns"] == {
        "order_id": {"nulls": 0},
        "price": {"nulls": 1, "min": 1.5, "max": 99.99},
        "bid_time": {"nulls": 0},
        "bid_hour": {"nulls": 0, "min": 0.0, "max": 23.0},
    }
    assert tables.table_quality(spark, table, None)["rows"] == 4  # the current snapshot
    spark.sql(f"DROP TABLE {table}")


def test_an_append_adds_its_observed_metrics_and_its_snapshots_totals():
    before = totals(**{"price:nulls": 2, "price:min": None, "price:max": None})  # its prices so far all null
    summary = {
        "added-data-files": "1",
        "total-data-files": "3",
        "total-records": "7",
        "total-files-size": "4500",
        "total-delete-files": "0",
    }
    after = quality.totals_after_append(
        before,
        summary,
        {"order_id:nulls": 0, "price:nulls": 1, "price:min": Decimal("5.00"), "price:max": Decimal("7.25")},
    )
    assert quality.table_quality_entry(after, COLUMNS) == {
        "rows": 7,
        "bytes": 4500,
        "files": 3,
        "columns": {"order_id": {"nulls": 0}, "price": {"nulls": 3, "min": 5.0, "max": 7.25}},
    }
    uncounted = quality.totals_after_append(totals(**{"price:counted": 1}), summary, {"price:nulls": 0})
    assert (
        "nulls" not in quality.table_quality_entry(uncounted, COLUMNS)["columns"]["price"]
    )  # a file before never counted them


def test_columns_missing_from_a_table_are_named():
    schema = StructType([StructField("order_id", StringType()), StructField("price", DecimalType(10, 2))])
    assert quality.numeric_columns(schema, ("price", "order_id")) == {"price": True, "order_id": False}
    with pytest.raises(ValueError, match="no column 'bid_time' in order_id, price"):
        quality.numeric_columns(schema, ("order_id", "bid_time"))


def test_a_continuous_runs_table_after_each_commit_is_its_manifests_without_reading_them(spark, tmp_path):
    spark.conf.set("spark.sql.catalog.committed_test", "org.apache.iceberg.spark.SparkCatalog")
    spark.conf.set("spark.sql.catalog.committed_test.type", "hadoop")
    spark.conf.set("spark.sql.catalog.committed_test.warehouse", tmp_path.as_uri())
    table = "committed_test.db.orders"
    schema = "order_id STRING, price DECIMAL(10,2), bid_time TIMESTAMP_NTZ"
    spark.sql(f"CREATE TABLE {table} ({schema}) USING iceberg PARTITIONED BY (days(bid_time))")
    committed = CommittedTable(spark, table)  # the table read before the query: empty
    aggregates = quality.column_aggregates(quality.numeric_columns(spark.table(table).schema))
    tracker = spark.sparkContext.statusTracker()

    def append(*rows) -> tuple[dict, list[int]]:
        """The table state ``committed`` gives after appending ``rows``, and the Spark jobs it ran."""
        observation = Observation()
        frame = spark.createDataFrame([(o, p and Decimal(p), dt.datetime.fromisoformat(t)) for o, p, t in rows], schema)
        frame.observe(observation, *aggregates.values()).writeTo(table).append()
        group = f"after-commit-{uuid.uuid4().hex}"  # a group of its own: this call's jobs only
        spark.sparkContext.setJobGroup(group, "the table after a commit")
        try:
            return committed.after_commit(spark, observation.get), list(tracker.getJobIdsForGroup(group))
        finally:
            spark.sparkContext.setJobGroup("", "")

    first, jobs_run = append(("a", None, "2026-11-20 10:00:00"), ("b", None, "2026-11-21 10:00:00"))
    assert first == tables.table_state(spark, table) and not jobs_run  # added to the empty table's totals
    assert first["quality"]["columns"]["price"] == {"nulls": 2}  # no bounds: no price yet
    empty, jobs_run = append()  # a batch of dead letters only
    assert empty == tables.table_state(spark, table) and not jobs_run
    second, jobs_run = append(("c", "5.00", "2026-11-21 11:00:00"), ("d", None, "2026-11-22 10:00:00"))
    assert second == tables.table_state(spark, table) and not jobs_run
    assert second["quality"]["rows"] == 4 and second["quality"]["columns"]["price"] == {
        "nulls": 3,
        "min": 5.0,
        "max": 5.0,
    }
    spark.sql(f"INSERT INTO {table} VALUES ('e', 1.00, TIMESTAMP_NTZ'2026-11-22 12:00:00')")  # another writer's commit
    third, jobs_run = append(("f", "9.99", "2026-11-23 10:00:00"))
    assert (
        third == tables.table_state(spark, table) and jobs_run
    )  # read whole: the commit did not follow the last one seen
    assert third["quality"]["columns"]["price"] == {"nulls": 3, "min": 1.0, "max": 9.99}
    spark.sql(f"DROP TABLE {table}")


class Progress:
    def __init__(self, batch_id: int, metrics: dict | None):
        self.batchId = batch_id
        self.observedMetrics = {quality.ColumnMetrics.OBSERVATION: Row(**metrics)} if metrics is not None else {}


def test_column_metrics_add_up_the_batches_each_once():
    columns = quality.ColumnMetrics()
    columns.numeric = {"key": False, "offset": True}
    for progress in (
        Progress(0, {"key:nulls": 1, "offset:min": 0, "offset:max": 9}),
        Progress(1, {"key:nulls": 2, "offset:min": 10, "offset:max": 19}),
        Progress(1, {"key:nulls": 2, "offset:min": 10, "offset:max": 19}),  # reported again
        Progress(2, None),
    ):  # a batch observing nothing
        columns.count_observed(progress)
    assert columns.summary() == {"key": {"nulls": 3}, "offset": {"nulls": 0, "min": 0.0, "max": 19.0}}


def test_a_run_writing_nothing_has_zero_nulls_and_no_bounds():
    columns = quality.ColumnMetrics()
    columns.numeric = {"key": False, "offset": True}
    assert columns.summary() == {"key": {"nulls": 0}, "offset": {"nulls": 0}}


def test_a_streaming_query_observes_its_records_metrics_batch_by_batch(spark, tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    for i, rows in enumerate(
        [
            [{"key": "a", "offset": 3, "price": "1.50"}, {"key": None, "offset": 4, "price": None}],
            [{"key": "c", "offset": 1, "price": "99.99"}],
        ]
    ):
        (source / f"{i}.json").write_text("\n".join(json.dumps(row) for row in rows))
    schema = "key STRING, offset BIGINT, price STRING"
    records = (
        spark.readStream.schema(schema)
        .option("maxFilesPerTrigger", 1)
        .json(str(source))
        .selectExpr("key", "offset", "CAST(price AS DECIMAL(10,2)) AS price", "current_timestamp() AS at")
    )
    columns = quality.ColumnMetrics()
    query = (
        columns.observed(records)
        .writeStream.format("json")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    for progress in query.recentProgress:
        columns.count_observed(progress)
    assert len(columns.batches) == 2
    assert columns.summary() == {
        "key": {"nulls": 1},
        "offset": {"nulls": 0, "min": 1.0, "max": 4.0},
        "price": {"nulls": 1, "min": 1.5, "max": 99.99},
        "at": {"nulls": 0},
    }

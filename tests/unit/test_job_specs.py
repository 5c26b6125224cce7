"""The Spark job specs: one set of arguments for catch-up runs and deployments, and reports read
back as the class the job wrote."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from lineage_assets import job_specs
from lineage_assets.datasets import DATASETS, LAKEHOUSE_ORDERS, SUPPLIER_STATS
from lineage_assets.settings import Settings


def option(arguments: tuple[str, ...], name: str) -> str:
    return arguments[arguments.index(name) + 1]


def test_every_streaming_job_reads_orders_as_the_reader_schema_from_its_own_checkpoint(tmp_path):
    settings = Settings(state_dir=tmp_path, orders_topic="sales", kafka_bootstrap="k1:9092,k2:9092")
    checkpoints = set()
    for key, job in job_specs.STREAMING_JOBS.items():
        spec = job(settings)
        assert spec.dataset is DATASETS[key] and spec.dataset.job.streaming
        assert spec.script == spec.dataset.job.source
        assert option(spec.arguments, "--topic") == "sales" and option(spec.arguments, "--subject") == "sales-value"
        assert option(spec.arguments, "--bootstrap-servers") == "k1:9092,k2:9092"
        checkpoints.add(option(spec.arguments, "--checkpoint"))
    assert checkpoints == {str(tmp_path / "checkpoints" / DATASETS[key].job.name) for key in job_specs.STREAMING_JOBS}


def test_checkpoints_go_where_the_setting_says_for_a_cluster_of_several_machines():
    settings = Settings(checkpoint_location="s3://shared/checkpoints/")
    assert (
        option(job_specs.ingestion_job(settings).arguments, "--checkpoint")
        == f"s3://shared/checkpoints/{LAKEHOUSE_ORDERS.job.name}"
    )


def test_a_job_that_creates_a_table_gets_the_catalog_columns():
    settings = Settings()
    ingestion = job_specs.ingestion_job(settings)
    assert option(ingestion.arguments, "--columns") == (
        "order_id string, item string, price decimal(10,2), supplier string, bid_time timestamp_ntz"
    )
    assert option(
        job_specs.supplier_stats_job(settings, "2026-11-23").arguments, "--columns"
    ) == job_specs.table_columns(SUPPLIER_STATS)
    assert [c.split()[0] for c in job_specs.table_columns(LAKEHOUSE_ORDERS).split(", ")] == [
        c.name for c in LAKEHOUSE_ORDERS.columns
    ]


def test_a_report_reads_back_as_written_and_a_key_the_caller_does_not_know_is_an_error(tmp_path):
    report = job_specs.LiveStatsReport(
        duration_seconds=1.5,
        batches=2,
        rows_in=10,
        start_offsets=None,
        end_offsets={"orders": {"0": 4, "1": 6}},
        schema_versions=[],
        windows_written=3,
        output_start_offsets={"supplier-stats": {"0": 7}},
        output_end_offsets={"supplier-stats": {"0": 10}},
    )
    path = tmp_path / "report.json"
    report.write(path)
    assert job_specs.LiveStatsReport.read(path) == report
    assert report.consumed_records == 10
    path.write_text(json.dumps({**json.loads(path.read_text()), "windows_emitted": 3}))
    with pytest.raises(TypeError, match="windows_emitted"):
        job_specs.LiveStatsReport.read(path)


def test_the_batch_bound_reaches_every_streaming_job_only_when_set():
    bounded = Settings(max_records_per_batch=50_000)
    for job in job_specs.STREAMING_JOBS.values():
        assert option(job(bounded).arguments, "--max-records-per-batch") == "50000"
        assert "--max-records-per-batch" not in job(Settings()).arguments
    with pytest.raises(ValueError, match="LINEAGE_ASSETS_MAX_RECORDS_PER_BATCH=-5"):
        job_specs.ingestion_job(Settings(max_records_per_batch=-5))


@pytest.mark.parametrize("value", ["0", "-5", "many"])
def test_a_batch_bound_that_is_not_a_positive_number_is_refused_naming_it(value, capsys):
    from spark.support.arguments import streaming_arguments

    parser = streaming_arguments("test")
    required = [
        "--bootstrap-servers",
        "k:9092",
        "--topic",
        "orders",
        "--value-schema",
        "{}",
        "--registry-url",
        "http://r",
        "--subject",
        "orders-value",
        "--checkpoint",
        "/tmp/c",
        "--report",
        "/tmp/r.json",
    ]
    with pytest.raises(SystemExit):
        parser.parse_args([*required, "--max-records-per-batch", value])
    assert f"'{value}' is not a positive whole number" in capsys.readouterr().err


def test_the_upkeep_compacts_orders_closed_days_expires_both_tables_and_deletes_their_files_past_the_orphan_age():
    settings = Settings(
        catalog_name="lake",
        iceberg_namespace="sales",
        snapshot_retention_hours=6,
        snapshots_kept=20,
        orphan_file_age_hours=48,
    )
    now = dt.datetime(2026, 11, 28, 0, 30, tzinfo=dt.timezone(dt.timedelta(hours=1)))  # 23:30 UTC the day before
    arguments = job_specs.lakehouse_upkeep_arguments(settings, now)
    compacted = [arguments[i + 1] for i, name in enumerate(arguments) if name == "--compact"]
    assert compacted == ["lake.`sales`.orders"]  # supplier_stats rewrites a day whole: no small files
    assert option(arguments, "--closed-before") == "2026-11-27"  # the UTC day still written to is left
    tables = [arguments[i + 1] for i, name in enumerate(arguments) if name == "--table"]
    # Not the supplier dimension: its snapshots are what supplier_revenue reads as of a day.
    assert tables == ["lake.`sales`.orders", "lake.`sales`.supplier_stats", "lake.`sales`.supplier_revenue"]
    assert option(arguments, "--older-than") == "2026-11-27T17:30:00"  # UTC, as the job reads it
    assert option(arguments, "--retain-last") == "20"
    assert option(arguments, "--orphans-older-than") == "2026-11-25T23:30:00"

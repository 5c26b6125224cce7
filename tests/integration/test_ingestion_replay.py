"""The ingestion's batches: exactly once across a crash between its Iceberg commit and Spark's own
commit (the batch Spark runs again finds its snapshot and writes nothing), and bounded in size."""

from __future__ import annotations

import dataclasses
import datetime as dt

from lineage_assets.datasets import iceberg_table_name
from lineage_assets.generator import GeneratorConfig, generate_orders, produce_orders
from lineage_assets.job_specs import ingestion_job
from lineage_assets.resources.spark_jobs import SparkJobsResource
from tests.integration.test_deployments import orders_topic_ready, rows_and_orders


def test_a_batch_committed_to_the_table_but_not_to_the_checkpoint_is_not_written_again(
    stack, settings, spark, tmp_path
):
    # Topics, table and checkpoint of its own: no other test's data, and no lineage (a bare submit).
    probe = dataclasses.replace(
        settings,
        orders_topic="replay-probe-orders",
        dead_letter_topic="replay-probe-dlq",
        iceberg_namespace="replay_probe",
        checkpoint_location=str(tmp_path / "checkpoints"),
    )
    spark_jobs = SparkJobsResource(environment=orders_topic_ready(probe))
    orders = list(
        generate_orders(GeneratorConfig(count=40, seed=17, start=dt.datetime(2026, 11, 24, 9, tzinfo=dt.UTC)))
    )
    produce_orders(orders, probe)
    valid = [o.key for o in orders]  # no bad orders (the generator's default)
    job = ingestion_job(probe)
    table = iceberg_table_name(probe, "orders")

    first = job.report(**spark_jobs.submit(job.script, list(job.arguments)))
    assert (first.rows_written, first.batches_replayed) == (len(valid), 0)

    # The crash: the table has the batch's snapshot, the checkpoint's commit log does not have the batch.
    commits = tmp_path / "checkpoints" / job.dataset.job.name / "commits"
    for entry in commits.iterdir():
        entry.unlink()
    again = job.report(**spark_jobs.submit(job.script, list(job.arguments)))
    assert (again.rows_written, again.batches_replayed) == (0, 1)
    assert rows_and_orders(spark, table, valid) == (len(valid), len(valid))

    # Its next run starts from the checkpoint again, with nothing left to write.
    assert job.report(**spark_jobs.submit(job.script, list(job.arguments))).rows_written == 0


def test_with_a_batch_bound_a_catch_up_run_commits_the_topic_in_batches_of_at_most_the_bound(
    stack, settings, spark, tmp_path
):
    # A deployment back from an outage catches up in bounded batches, each its own snapshot.
    probe = dataclasses.replace(
        settings,
        orders_topic="bounded-probe-orders",
        dead_letter_topic="bounded-probe-dlq",
        iceberg_namespace="bounded_probe",
        checkpoint_location=str(tmp_path / "checkpoints"),
        max_records_per_batch=15,
    )
    spark_jobs = SparkJobsResource(environment=orders_topic_ready(probe))
    orders = list(
        generate_orders(GeneratorConfig(count=40, seed=23, start=dt.datetime(2026, 11, 25, 9, tzinfo=dt.UTC)))
    )
    produce_orders(orders, probe)
    job = ingestion_job(probe)
    table = iceberg_table_name(probe, "orders")

    report = job.report(**spark_jobs.submit(job.script, list(job.arguments)))
    assert (report.rows_in, report.rows_written) == (40, 40)
    assert rows_and_orders(spark, table, [o.key for o in orders]) == (40, 40)
    added = [
        int(row[0])
        for row in spark.sql(f"SELECT summary['added-records'] FROM {table}.snapshots ORDER BY committed_at").collect()
    ]
    assert sum(added) == 40 and len(added) >= 3 and max(added) <= 15
    assert report.batches == len(added)

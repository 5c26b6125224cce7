"""Lineage overhead, batch: the `supplier_stats` Spark job on the same data with lineage fully on
(the project's events plus the openlineage-spark agent nested under them) and fully off, run
alternately in the same stack; the ratio of medians is the cost of lineage."""

from __future__ import annotations

import datetime as dt
import statistics
import time

import dagster as dg
from openlineage.client.event_v2 import RunState

from lineage_assets.catalog import SUPPLIER_STATS, iceberg_table_name
from lineage_assets.demo import run_pipeline
from lineage_assets.lineage import events
from lineage_assets.resources.lakehouse import LakehouseResource
from lineage_assets.resources.lineage import AssetRunLineage, emitter_for, lineage_folder
from lineage_assets.resources.spark_jobs import SparkJobsResource


def run(lakehouse: LakehouseResource, quick: bool) -> dict:
    orders, rounds = (2_000, 2) if quick else (50_000, 5)
    settings = lakehouse.settings()
    start = dt.datetime(2026, 1, 15, 0, 0, tzinfo=dt.UTC)
    first = run_pipeline(lakehouse, dg.DagsterInstance.ephemeral(), {
        "count": orders, "seed": 5, "start": start.isoformat(), "interval_seconds": 86_000 / orders})
    day = "2026-01-15"
    assert day in first.days, first.days
    spark_jobs = SparkJobsResource(lakehouse=lakehouse)
    arguments = ["--source", iceberg_table_name(settings, "orders"), "--target", iceberg_table_name(settings, "supplier_stats"),
                 "--day", day]
    emitter = emitter_for(settings)
    timings: dict[str, list[float]] = {"off": [], "on": []}
    for round_number in range(rounds):
        for mode in ("off", "on"):  # alternate, so drift affects both alike
            started = time.monotonic()
            if mode == "off":
                spark_jobs.submit(SUPPLIER_STATS.job.source, arguments)
            else:
                dagster_run = events.DagsterRun(run_id=f"bench-{round_number}", job_name="bench", started_at=dt.datetime.now(dt.UTC))
                run = AssetRunLineage(emitter, SUPPLIER_STATS, dagster_run, settings)
                run.emit(RunState.START)
                spark_events = lineage_folder(settings) / "spark" / f"{run.run_id}.jsonl"
                report = spark_jobs.submit(SUPPLIER_STATS.job.source, arguments, extra_conf=run.spark_conf(spark_events))
                run.take_spark_events(spark_events)
                run.complete(events.OutputStatistics(rows=report["rows_written"]), "OVERWRITE")
                run.emit(RunState.COMPLETE)
            timings[mode].append(time.monotonic() - started)
    off, on = statistics.median(timings["off"]), statistics.median(timings["on"])
    return {"name": "lineage_overhead_batch", "target": "ratio <= 1.03", "met": on / off <= 1.03,
            "orders_in_day": orders, "rounds": rounds, "median_off_s": round(off, 3), "median_on_s": round(on, 3),
            "ratio": round(on / off, 4), "timings_s": {k: [round(t, 3) for t in v] for k, v in timings.items()}}

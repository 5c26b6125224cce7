"""Table upkeep: what an aged table costs each commit of a continuous deployment, and what the
hourly upkeep (`lakehouse_maintenance`: Iceberg's expire_snapshots) gives back. One Spark job
(bench/table_upkeep_job.py) commits to a fresh table until it holds thousands of snapshots, runs the
upkeep's own expiry, and commits again; each commit is timed in the same JVM.

The ratios compare the median commit of three windows of the same length: just past the newest 100
(the snapshots the upkeep keeps), the last before the upkeep, and the first after it."""

from __future__ import annotations

from bench.measure import median
from bench.table_upkeep_job import TableUpkeepReport
from lineage_assets.datasets import iceberg_table_name
from lineage_assets.job_specs import SNAPSHOTS_RETAINED
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.resources.spark_jobs import SparkJobsResource

TARGET = 1.1  # a commit after the upkeep, against one on a table of as many snapshots as it keeps
FULL_COMMITS, QUICK_COMMITS = 1_000, 200
WINDOW = 50


def run(environment: SettingsResource, quick: bool) -> dict:
    count = QUICK_COMMITS if quick else FULL_COMMITS
    spark_jobs = SparkJobsResource(environment=environment)
    table = iceberg_table_name(environment.settings, "bench_table_upkeep")
    arguments = ["--table", table, "--commits", str(count), "--window", str(WINDOW)]
    report = TableUpkeepReport(**spark_jobs.submit("bench/table_upkeep_job.py", arguments))
    fresh = median(report.commit_ms[SNAPSHOTS_RETAINED : SNAPSHOTS_RETAINED + WINDOW])
    aged = median(report.commit_ms[-WINDOW:])
    upkept = median(report.commit_after_ms)
    return {
        "name": "table_upkeep",
        "target": f"a commit after the upkeep <= {TARGET}x one at {SNAPSHOTS_RETAINED} snapshots",
        "met": upkept / fresh <= TARGET,
        "commits": count,
        "fresh_ms": fresh,
        "aged_ms": aged,
        "upkept_ms": upkept,
        "aged_ratio": round(aged / fresh, 3),
        "upkept_ratio": round(upkept / fresh, 3),
        "upkeep_s": report.upkeep_s,
        "upkeep": report.upkeep,
    }


def summary(result: dict) -> str:
    upkeep = result["upkeep"]
    deleted = upkeep["deleted_manifest_lists_count"] + upkeep["deleted_manifest_files_count"]
    return (
        f"a commit at {result['commits']:,} snapshots {result['aged_ms']} ms vs {result['fresh_ms']} ms at "
        f"{SNAPSHOTS_RETAINED} (**{result['aged_ratio']}x**); the upkeep expired "
        f"{upkeep['snapshots_before'] - upkeep['snapshots_after']:,} snapshots and {deleted:,} files in "
        f"{result['upkeep_s']} s, then a commit {result['upkept_ms']} ms (**{result['upkept_ratio']}x**)"
    )

"""Table upkeep: what an aged table costs each commit of a continuous deployment and each read of a
day it wrote, and what the hourly upkeep (`lakehouse_maintenance`: Iceberg's rewrite_data_files,
expire_snapshots and remove_orphan_files) gives back and costs. One Spark job
(bench/table_upkeep_job.py) commits to a fresh table until it holds thousands of snapshots and small
files, reads the day, runs the upkeep's own compaction, expiry and orphan removal, reads the day again
and commits again; each commit and read is timed in the same JVM.

The ratios compare the median commit of three windows of the same length: just past the newest 100
(the snapshots the upkeep keeps), the last before the upkeep, and the first after it; and the day's
read before the upkeep against the one after it."""

from __future__ import annotations

from bench.measure import median
from bench.table_upkeep_job import TableUpkeepReport
from lineage_assets.datasets import iceberg_table_name
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.resources.spark_jobs import SparkJobsResource

TARGET = 1.1  # a commit after the upkeep, against one on a table of as many snapshots as it keeps
FULL_COMMITS, QUICK_COMMITS = 1_000, 200
WINDOW = 50


def run(environment: SettingsResource, quick: bool) -> dict:
    count = QUICK_COMMITS if quick else FULL_COMMITS
    spark_jobs = SparkJobsResource(environment=environment)
    table = iceberg_table_name(environment.settings, "bench_table_upkeep")
    kept = environment.settings.snapshots_kept
    arguments = ["--table", table, "--commits", str(count), "--window", str(WINDOW), "--retain-last", str(kept)]
    report = TableUpkeepReport(**spark_jobs.submit("bench/table_upkeep_job.py", arguments))
    fresh = median(report.commit_ms[kept : kept + WINDOW])
    aged = median(report.commit_ms[-WINDOW:])
    upkept = median(report.commit_after_ms)
    return {
        "name": "table_upkeep",
        "target": f"a commit after the upkeep <= {TARGET}x one at {kept} snapshots",
        # A fresh table has no file as old as the orphan age: a deleted one would be a referenced one.
        "met": upkept / fresh <= TARGET and report.same_totals and not report.orphans["deleted_orphan_files"],
        "commits": count,
        "fresh_ms": fresh,
        "aged_ms": aged,
        "upkept_ms": upkept,
        "aged_ratio": round(aged / fresh, 3),
        "upkept_ratio": round(upkept / fresh, 3),
        "upkeep_s": report.upkeep_s,
        "orphans_s": report.orphans_s,
        "compacted": report.compacted,
        "expired": report.expired,
        "read_ms": report.read_ms,
        "read_after_ms": report.read_after_ms,
        "read_ratio": round(report.read_ms / report.read_after_ms, 1),
        "same_totals": report.same_totals,
    }


def summary(result: dict) -> str:
    compacted, expired = result["compacted"], result["expired"]
    deleted = sum(count for name, count in expired.items() if name.startswith("deleted_"))
    return (
        f"a commit at {result['commits']:,} snapshots {result['aged_ms']} ms vs {result['fresh_ms']} ms at "
        f"{expired['snapshots_after']} (**{result['aged_ratio']}x**); the day's read {result['read_ms']} ms; "
        f"the upkeep compacted {compacted['rewritten_data_files_count']:,} files into "
        f"{compacted['added_data_files_count']}, "
        f"expired {expired['snapshots_before'] - expired['snapshots_after']:,} snapshots and deleted {deleted:,} "
        f"files in {result['upkeep_s']} s (the orphan scan {result['orphans_s']} s of it), then a commit "
        f"{result['upkept_ms']} ms (**{result['upkept_ratio']}x**) "
        f"and the read {result['read_after_ms']} ms (**{result['read_ratio']}x faster**"
        + ("" if result["same_totals"] else "; NOT the same totals")
        + ")"
    )

"""The ways the benchmarks run the `supplier_stats` batch job for one day: a bare spark-submit (the
floor: no lineage, no Dagster) and a Dagster materialization of the asset."""

from __future__ import annotations

import dagster as dg

from lineage_assets.assets.common import asset_key
from lineage_assets.catalog import SUPPLIER_STATS, iceberg_table_name
from lineage_assets.definitions import build_definitions
from lineage_assets.resources.lakehouse import LakehouseResource
from lineage_assets.resources.spark_jobs import SparkJobsResource
from lineage_assets.settings import Settings


def job_arguments(settings: Settings, day: str) -> list[str]:
    return ["--source", iceberg_table_name(settings, "orders"), "--target", iceberg_table_name(settings, "supplier_stats"),
            "--day", day]


def bare_submit(spark_jobs: SparkJobsResource, day: str, extra_conf: dict[str, str] | None = None) -> dict:
    return spark_jobs.submit(SUPPLIER_STATS.job.source, job_arguments(spark_jobs.lakehouse.settings(), day), extra_conf=extra_conf)


def materialize(lakehouse: LakehouseResource, day: str) -> dg.ExecuteInJobResult:
    """The asset, in process, as `make demo` runs it (lineage on), on a throw-away instance."""
    definitions = build_definitions(lakehouse)
    result = dg.materialize(definitions.assets, selection=[asset_key(SUPPLIER_STATS)], partition_key=day,
                            resources=definitions.resources, instance=dg.DagsterInstance.ephemeral())
    if not result.success:
        raise RuntimeError(f"supplier_stats for {day} failed")
    return result

"""The ways the benchmarks run the `supplier_stats` batch job for one day: a bare spark-submit (the
floor: no lineage, no Dagster) and a Dagster materialization of the asset."""

from __future__ import annotations

import dagster as dg

from lineage_assets.assets.common import asset_key
from lineage_assets.datasets import SUPPLIER_STATS
from lineage_assets.definitions import build_definitions, materializable
from lineage_assets.job_specs import SupplierStatsReport, supplier_stats_job
from lineage_assets.processes import sigterm_kept
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.resources.spark_jobs import SparkJobsResource


def bare_submit(
    spark_jobs: SparkJobsResource, day: str, extra_conf: dict[str, str] | None = None
) -> SupplierStatsReport:
    return spark_jobs.run(supplier_stats_job(spark_jobs.environment.settings, day), extra_conf=extra_conf)


def materialize(environment: SettingsResource, day: str) -> dg.ExecuteInJobResult:
    """The asset, in process, as `make demo` runs it (lineage on), on a throw-away instance."""
    definitions = build_definitions(environment)
    with sigterm_kept():
        result = dg.materialize(
            materializable(definitions.assets),
            selection=[asset_key(SUPPLIER_STATS)],
            partition_key=day,
            resources=definitions.resources,
            instance=dg.DagsterInstance.ephemeral(),
        )
    if not result.success:
        raise RuntimeError(f"supplier_stats for {day} failed")
    return result

"""The one Definitions: assets, checks, sensors, jobs and resources, chosen for the environment."""

from __future__ import annotations

import dagster as dg
from dagster_pyspark import PySparkResource

from lineage_assets.assets.archive import build_archive_assets
from lineage_assets.assets.lakehouse import build_lakehouse_definitions
from lineage_assets.assets.live_stats import build_live_stats_assets
from lineage_assets.assets.orders import build_orders_asset
from lineage_assets.resources.kafka import KafkaResource
from lineage_assets.resources.lakehouse import LakehouseResource
from lineage_assets.resources.lineage import RUN_LINEAGE_SENSORS, LineageResource, run_lineage_executor
from lineage_assets.resources.spark_jobs import SparkJobsResource
from lineage_assets.spark_conf import spark_conf
from lineage_assets.streaming.supervision import streaming_deployments, streaming_deployments_supervisor


def build_resources(lakehouse: LakehouseResource) -> dict:
    settings = lakehouse.settings()
    return {
        "lakehouse": lakehouse,
        "kafka": KafkaResource(lakehouse=lakehouse),
        "spark_jobs": SparkJobsResource(lakehouse=lakehouse),
        "lineage": LineageResource(lakehouse=lakehouse),
        # In-process Spark for asset checks that read the tables.
        "pyspark": PySparkResource(spark_config={**spark_conf(settings), "spark.app.name": "lineage-assets-checks"}),
    }


def build_definitions(lakehouse: LakehouseResource | None = None) -> dg.Definitions:
    lakehouse = lakehouse or LakehouseResource()
    settings = lakehouse.settings()
    lakehouse_definitions = build_lakehouse_definitions(settings)
    archive = build_archive_assets(settings)
    return dg.Definitions(
        assets=[build_orders_asset(settings), archive[0], *build_live_stats_assets(settings), *lakehouse_definitions["assets"]],
        asset_checks=[archive[1], *lakehouse_definitions["asset_checks"]],
        jobs=[*lakehouse_definitions["jobs"], streaming_deployments],
        sensors=[*lakehouse_definitions["sensors"], *RUN_LINEAGE_SENSORS, streaming_deployments_supervisor],
        resources=build_resources(lakehouse),
        executor=run_lineage_executor(settings),
    )


defs = build_definitions()

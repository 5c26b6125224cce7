"""Every resource the definitions require, bound to one environment: the definitions bind them to
theirs, and a test to its own (``lineage_assets.testing``)."""

from __future__ import annotations

from lineage_assets.resources.kafka import KafkaResource
from lineage_assets.resources.lineage import LineageResource
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.resources.spark_jobs import SparkJobsResource
from lineage_assets.resources.spark_session import CheckSparkResource


def build_resources(environment: SettingsResource) -> dict:
    """The resources of the assets, checks, sensors and jobs, each reading ``environment``."""
    return {
        "environment": environment,
        "kafka": KafkaResource(environment=environment),
        "spark_jobs": SparkJobsResource(environment=environment),
        "lineage": LineageResource(environment=environment),
        # In-process Spark for asset checks that read the tables.
        "pyspark": CheckSparkResource(
            environment=environment, spark_config={"spark.app.name": "lineage-assets-checks"}
        ),
    }

"""The asset checks' in-process Spark session: dagster-pyspark's resource, started the project's way."""

from __future__ import annotations

import dagster as dg
from dagster_pyspark import PySparkResource

from lineage_assets.resources.settings import SettingsResource
from lineage_assets.spark_conf import in_process_session


class CheckSparkResource(PySparkResource):
    """``PySparkResource`` whose session has the settings' Spark configuration with its secrets kept
    off the JVM's command line (``spark_conf.in_process_session``); dagster-pyspark's own set-up passes
    every entry of ``spark_config`` as a ``--conf`` argument, which any user of the machine can read,
    and its config is shown in Dagster's UI. ``spark_config`` adds to the settings' entries."""

    environment: SettingsResource

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        self._spark_session = in_process_session(self.environment.settings, self.spark_config)

"""The one Definitions: each area's assets, checks, sensors and jobs, merged, with the resources
chosen for the environment."""

from __future__ import annotations

import gc
from collections.abc import Iterable

import dagster as dg

from lineage_assets.assets.archive import archive_definitions
from lineage_assets.assets.deployments import deployments_definitions
from lineage_assets.assets.design import asset_designs, design_definitions, publish_design
from lineage_assets.assets.lakehouse import lakehouse_definitions
from lineage_assets.assets.live_stats import live_stats_definitions
from lineage_assets.assets.orders import orders_definitions
from lineage_assets.assets.run_lineage import run_lineage_definitions
from lineage_assets.lineage.design import Published
from lineage_assets.resources.kafka import KafkaResource
from lineage_assets.resources.lineage import LineageResource
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.resources.spark_jobs import SparkJobsResource
from lineage_assets.resources.spark_session import CheckSparkResource
from lineage_assets.settings import Settings


def build_resources(environment: SettingsResource) -> dict:
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


def materializable(assets: Iterable[object] | None) -> list[dg.AssetsDefinition | dg.AssetSpec | dg.SourceAsset]:
    """A Definitions' ``assets`` or ``asset_checks`` as ``dg.materialize`` takes them: it takes no
    cacheable assets (the project defines none)."""
    taken: list[dg.AssetsDefinition | dg.AssetSpec | dg.SourceAsset] = []
    for each in assets or ():
        if not isinstance(each, (dg.AssetsDefinition, dg.AssetSpec, dg.SourceAsset)):
            raise TypeError(f"dg.materialize cannot take {each!r}")
        taken.append(each)
    return taken


def build_definitions(environment: SettingsResource | None = None) -> dg.Definitions:
    environment = environment or SettingsResource()
    settings = environment.settings
    return dg.Definitions.merge(
        orders_definitions(settings),
        archive_definitions(settings),
        live_stats_definitions(settings),
        lakehouse_definitions(settings),
        deployments_definitions(),
        run_lineage_definitions(settings),
        design_definitions(),
        dg.Definitions(resources=build_resources(environment)),
    )


def publish_definitions(settings: Settings, force: bool = False) -> Published:
    """The designed lineage graph of the definitions loaded for ``settings``, published where it
    changed (`lineage publish`, `stack up`, the demo; in `dagster dev`, a sensor does it)."""
    asset_graph = build_definitions(SettingsResource.of(settings)).resolve_asset_graph()
    return publish_design(asset_designs(asset_graph), settings, force)


defs = build_definitions()
# The definitions and the modules behind them live as long as the process: frozen, they are left out
# of every later full garbage collection, the interpreter's own at exit included.
gc.freeze()

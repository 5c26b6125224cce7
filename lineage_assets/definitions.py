"""The one Definitions: each area's assets, checks, sensors and jobs, merged, with the resources
chosen for the environment bound here and nowhere else.

The assets and checks are defined once, at module level in ``lineage_assets/assets/``, and read
every address and name from their resources when they run. What Dagster reads from the loaded
definitions themselves is bound here with the resources: each asset's page names its dataset in
that environment's lineage backend, the upkeep runs on its cron, and its executor reports each
run's lineage there."""

from __future__ import annotations

import gc
from collections.abc import Iterable

import dagster as dg

from lineage_assets import assets as asset_modules
from lineage_assets.assets.common import environment_metadata
from lineage_assets.assets.deployments import streaming_deployments, streaming_deployments_supervisor
from lineage_assets.assets.design import asset_designs, publish_design, publish_lineage_design
from lineage_assets.assets.lakehouse import rebuild_supplier_stats, supplier_stats_on_new_orders
from lineage_assets.assets.lakehouse_upkeep import lakehouse_maintenance, upkeep_schedule
from lineage_assets.assets.run_lineage import dead_dagster_run_lineage, run_lineage_executor
from lineage_assets.lineage.design import Published
from lineage_assets.resources.binding import build_resources
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.settings import Settings


# Every asset and separately evaluated check defined in the modules of lineage_assets/assets/: a new
# module's are in the definitions without a line here.
def _assets_defined(loaded: Iterable[object]) -> list[dg.AssetsDefinition]:
    """The asset definitions loaded from the modules; anything else there is a mistake, not skipped."""
    others = [each for each in loaded if not isinstance(each, dg.AssetsDefinition)]
    if others:
        raise TypeError(f"lineage_assets/assets/ defines assets as no @asset does: {others!r}")
    return [each for each in loaded if isinstance(each, dg.AssetsDefinition)]


ASSETS = _assets_defined(dg.load_assets_from_package_module(asset_modules))
ASSET_CHECKS = dg.load_asset_checks_from_package_module(asset_modules)


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
    return dg.Definitions(
        assets=dg.map_asset_specs(environment_metadata(settings), ASSETS),
        asset_checks=ASSET_CHECKS,
        jobs=[rebuild_supplier_stats, lakehouse_maintenance, streaming_deployments],
        schedules=[upkeep_schedule(settings)],
        sensors=[
            supplier_stats_on_new_orders,
            streaming_deployments_supervisor,
            dead_dagster_run_lineage,
            publish_lineage_design,
        ],
        executor=run_lineage_executor(settings),
        resources=build_resources(environment),
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

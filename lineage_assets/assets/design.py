"""The designed graph, published to the lineage backend from the loaded definitions.

A sensor publishes it when the code location loads and on each later tick: it runs in the daemon,
after the definitions are loaded, so emission stays out of the import that ``dagster dev``, the
webserver and every run worker do (a load must never wait on or fail for lineage). Publishing an
unchanged graph records nothing (``lineage/design.py``), so a tick costs building the events only.
"""

from __future__ import annotations

import dagster as dg

from lineage_assets.datasets import Column
from lineage_assets.lineage.design import AssetDesign, Published, design_events, publish
from lineage_assets.lineage.emitter import emitter_for
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.settings import Settings

PUBLISH_INTERVAL_S = 60


def asset_designs(asset_graph) -> list[AssetDesign]:
    """Every asset of a loaded asset graph (``Definitions.resolve_asset_graph()`` or a repository's
    ``asset_graph``) as the definitions declare it: group, kinds, owners, columns, deps and checks."""
    checks: dict[dg.AssetKey, list[str]] = {}
    for check_key in asset_graph.asset_check_keys:
        checks.setdefault(check_key.asset_key, []).append(check_key.name)
    designs = []
    for spec in (node.to_asset_spec() for node in asset_graph.asset_nodes):
        schema = spec.metadata.get("dagster/column_schema")
        columns = tuple(Column(c.name, c.type, c.description or "") for c in (schema.columns if schema else ()))
        designs.append(
            AssetDesign(
                key=spec.key.to_user_string(),
                group=spec.group_name or "default",
                kinds=tuple(sorted(spec.kinds)),
                owners=tuple(spec.owners),
                description=spec.description or "",
                columns=columns,
                upstream=tuple(dep.asset_key.to_user_string() for dep in spec.deps),
                checks=tuple(sorted(checks.get(spec.key, ()))),
            )
        )
    return designs


def publish_design(asset_graph, settings: Settings, force: bool = False) -> Published:
    return publish(design_events(asset_designs(asset_graph), settings), emitter_for(settings), force=force)


@dg.sensor(minimum_interval_seconds=PUBLISH_INTERVAL_S, default_status=dg.DefaultSensorStatus.RUNNING)
def publish_lineage_design(context: dg.SensorEvaluationContext, environment: SettingsResource):
    """Publishes the designed lineage graph (a DatasetEvent per asset, a JobEvent per job) when it changed."""
    return dg.SkipReason(published_line(publish_design(context.repository_def.asset_graph, environment.settings)))


def design_definitions() -> dg.Definitions:
    return dg.Definitions(sensors=[publish_lineage_design])


def published_line(published: Published) -> str:
    retired = f", {len(published.retired)} retired (no longer in the definitions)" if published.retired else ""
    return f"lineage design: {len(published.sent)} events published, {published.unchanged} unchanged{retired}"

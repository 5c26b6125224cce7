"""The designed graph, published to the lineage backend from the loaded definitions.

A sensor publishes it when the code location loads and on each later tick: it runs in the daemon,
after the definitions are loaded, so emission stays out of the import that ``dagster dev``, the
webserver and every run worker do (a load must never wait on or fail for lineage). Publishing an
unchanged graph records nothing (``lineage/design.py``), so a tick costs building the events only.
A job no longer defined is retired by an event and then hidden in Marquez, where a job keeps its
last inputs and outputs drawn when a version with none arrives; that waits for the event's delivery
(Marquez shows a hidden job again when an event of it arrives), so it happens only on a retirement.
"""

from __future__ import annotations

import dataclasses

import dagster as dg

from lineage_assets.datasets import Column
from lineage_assets.lineage.check import log_design, retire
from lineage_assets.lineage.delivery import marquez_backend
from lineage_assets.lineage.design import AssetDesign, Published, design_events, publish
from lineage_assets.lineage.emitter import LineageEmitter, emitter_for
from lineage_assets.lineage.marquez import MarquezApi, MarquezError
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.settings import Settings

PUBLISH_INTERVAL_S = 60
RETIREMENT_DELIVERY_TIMEOUT_S = 30


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


def publish_design(assets: list[AssetDesign], settings: Settings, force: bool = False) -> Published:
    """Publish the design of ``assets`` (``asset_designs`` of a loaded asset graph) where it changed."""
    emitter = emitter_for(settings)
    published = publish(design_events(assets, settings), emitter, force=force)
    if published.retired:
        published = dataclasses.replace(published, hidden=tuple(_hide_retired(emitter, settings)))
    return published


def _hide_retired(emitter: LineageEmitter, settings: Settings) -> list[str]:
    """The retired jobs hidden in Marquez once their events are delivered; none when the lineage goes
    elsewhere or Marquez cannot take it now (the lineage check then names each, for `lineage retire`)."""
    if emitter.backend != marquez_backend(settings):
        return []
    if not emitter.flush(timeout=RETIREMENT_DELIVERY_TIMEOUT_S):
        return []
    try:
        return retire(MarquezApi.of(settings), settings, log_design(emitter.log))
    except MarquezError:
        return []


@dg.sensor(minimum_interval_seconds=PUBLISH_INTERVAL_S, default_status=dg.DefaultSensorStatus.RUNNING)
def publish_lineage_design(context: dg.SensorEvaluationContext, environment: SettingsResource):
    """Publishes the designed lineage graph (a DatasetEvent per asset, a JobEvent per job) when it changed."""
    if context.repository_def is None:
        raise dg.DagsterInvariantViolationError("publish_lineage_design needs the repository it is evaluated for")
    published = publish_design(asset_designs(context.repository_def.asset_graph), environment.settings)
    return dg.SkipReason(published_line(published))


def published_line(published: Published) -> str:
    line = f"lineage design: {len(published.sent)} events published, {published.unchanged} unchanged"
    if published.retired:
        line += f", {len(published.retired)} retired (no longer in the definitions)"
    if published.hidden:
        line += f"; hidden in Marquez: {', '.join(published.hidden)}"
    if {s.removeprefix("job ") for s in published.retired if s.startswith("job ")} - set(published.hidden):
        line += "; `lineage-assets lineage retire` hides the retired jobs in Marquez once it has their events"
    return line

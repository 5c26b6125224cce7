"""The designed graph as static OpenLineage events: what the loaded definitions and the catalog say,
valid against the official schemas, and published only where it changed."""

from __future__ import annotations

import json

import dagster as dg
import pytest

from lineage_assets.assets.design import asset_designs
from lineage_assets.datasets import ARCHIVE, CHECKS, DATASETS, LAKEHOUSE_ORDERS, SUPPLIER_STATS
from lineage_assets.definitions import build_definitions
from lineage_assets.lineage.check import check, not_yet_run
from lineage_assets.lineage.design import Published, PublishedDesign, design_events, publish
from lineage_assets.lineage.emitter import LineageEmitter
from lineage_assets.lineage.transport import event_line
from lineage_assets.settings import Settings
from tests.openlineage_schemas import validate_event
from tests.unit.test_lineage_check import pipeline

SETTINGS = Settings()


@pytest.fixture(scope="module")
def asset_graph():
    return build_definitions().resolve_asset_graph()


def designed(asset_graph) -> list[dict]:
    return [json.loads(event_line(event)) for event in design_events(asset_designs(asset_graph), SETTINGS)]


def test_every_static_event_validates_against_the_official_schemas(asset_graph):
    for event in designed(asset_graph):
        assert validate_event(event) == [], event.get("job") or event["dataset"]


def test_the_design_is_the_asset_graph_named_by_the_catalog(asset_graph):
    events = designed(asset_graph)
    datasets = {(e["dataset"]["namespace"], e["dataset"]["name"]): e["dataset"] for e in events if "dataset" in e}
    jobs = {e["job"]["name"]: e for e in events if "job" in e}
    assert set(datasets) == {d.identity(SETTINGS).node for d in DATASETS.values()}
    assert set(jobs) == {d.job.lineage_name for d in DATASETS.values()} | {c.lineage_name for c in CHECKS.values()}
    for dataset in DATASETS.values():
        static = datasets[dataset.identity(SETTINGS).node]
        assert [f["name"] for f in static["facets"]["schema"]["fields"]] == [c.name for c in dataset.columns]
        tags = {(t["key"], t["value"]) for t in static["facets"]["tags"]["tags"]}
        assert ("dagster.asset_key", dataset.key) in tags and ("dagster.kind", dataset.kind.value) in tags
        job = jobs[dataset.job.lineage_name]
        assert job["job"]["facets"]["jobType"]["processingType"] == dataset.job.processing_type
        assert job["job"]["facets"]["sourceCodeLocation"]["path"] == dataset.job.source
        assert [(i["namespace"], i["name"]) for i in job["inputs"]] == [
            DATASETS[key].identity(SETTINGS).node for key in dataset.upstream
        ]
        assert [(o["namespace"], o["name"]) for o in job["outputs"]] == [dataset.identity(SETTINGS).node]
    for asset_check in CHECKS.values():
        assert [(i["namespace"], i["name"]) for i in jobs[asset_check.lineage_name]["inputs"]] == [
            DATASETS[asset_check.dataset].identity(SETTINGS).node
        ]


def test_the_design_declares_column_lineage_back_to_the_topic_fields(asset_graph):
    """On the job's output and on the dataset's own event, the one Marquez shows the dataset with."""
    identity = LAKEHOUSE_ORDERS.identity(SETTINGS)
    events = designed(asset_graph)
    (job,) = [e for e in events if e.get("job", {}).get("name") == LAKEHOUSE_ORDERS.job.lineage_name]
    (dataset,) = [e for e in events if (e.get("dataset") or {}).get("name") == identity.name]
    for facets in (job["outputs"][0]["facets"], dataset["dataset"]["facets"]):
        price = facets["columnLineage"]["fields"]["price"]["inputFields"]
        assert {(f["name"], f["field"]) for f in price} >= {("orders", "price")}


def specs_with_one_more_column(asset_graph, key: str) -> dg.Definitions:
    specs = []
    for node in asset_graph.asset_nodes:
        spec = node.to_asset_spec()
        if spec.key.to_user_string() == key:
            schema = spec.metadata["dagster/column_schema"]
            wider = dg.TableSchema(columns=[*schema.columns, dg.TableColumn("discount", "decimal(10,2)")])
            spec = spec.replace_attributes(metadata={**spec.metadata, "dagster/column_schema": wider})
        specs.append(spec)
    return dg.Definitions(assets=specs)


def test_publishing_sends_only_what_changed(asset_graph, tmp_path):
    emitter = LineageEmitter(tmp_path)  # the log only: no backend
    plain = dg.Definitions(assets=[n.to_asset_spec() for n in asset_graph.asset_nodes]).resolve_asset_graph()
    first = publish(design_events(asset_designs(plain), SETTINGS), emitter)
    assert len(first.sent) == 2 * len(DATASETS) and first.unchanged == 0
    again = publish(design_events(asset_designs(plain), SETTINGS), emitter)
    assert again.sent == () and again.unchanged == 2 * len(DATASETS)
    assert len(emitter.design()) == 2 * len(DATASETS)  # nothing new in the log either

    wider = specs_with_one_more_column(asset_graph, LAKEHOUSE_ORDERS.key).resolve_asset_graph()
    changed = publish(design_events(asset_designs(wider), SETTINGS), emitter)
    identity = LAKEHOUSE_ORDERS.identity(SETTINGS)
    assert changed.sent == (f"dataset {identity.namespace} {identity.name}",)
    fields = emitter.design()[-1]["dataset"]["facets"]["schema"]["fields"]
    assert fields[-1]["name"] == "discount"
    assert emitter.events() == []  # static events are no run's


def test_an_asset_the_catalog_does_not_name_is_refused_by_name():
    from lineage_assets.lineage.design import AssetDesign, DesignError

    stranger = AssetDesign("lakehouse/refunds", "lakehouse", ("iceberg",), (), "", (), ())
    with pytest.raises(DesignError, match="asset 'lakehouse/refunds' is not in the dataset catalog"):
        design_events([stranger], SETTINGS)


def test_the_sensor_publishes_the_loaded_code_location_once(tmp_path):
    from lineage_assets.assets.design import publish_lineage_design
    from lineage_assets.resources.settings import SettingsResource

    settings = Settings(state_dir=tmp_path, marquez_url="")
    definitions = build_definitions(SettingsResource.of(settings))
    repository = definitions.get_repository_def()
    expected = 2 * len(DATASETS) + len(CHECKS)

    def tick() -> str:
        # The resources the sensor requires, as the daemon gives it: the others (a Spark session) are not built.
        resources = {key: definitions.resources[key] for key in publish_lineage_design.required_resource_keys}
        with dg.build_sensor_context(repository_def=repository, resources=resources) as context:
            return publish_lineage_design(context).skip_message

    assert tick() == f"lineage design: {expected} events published, 0 unchanged"
    assert tick() == f"lineage design: 0 events published, {expected} unchanged"
    assert len(LineageEmitter(settings.lineage_dir).design()) == expected


def published(asset_graph) -> PublishedDesign:
    return PublishedDesign.from_events(designed(asset_graph))


def ran(log: list[dict]) -> set[str]:
    return {f"{e['job']['namespace']}/{e['job']['name']}" for e in log}


def test_runs_as_designed_pass_and_a_designed_job_not_yet_run_is_a_note_not_a_gap(asset_graph):
    design = published(asset_graph)
    assert check(pipeline(), SETTINGS, design=design) == []
    assert not_yet_run(design, ran(pipeline())) == []
    # Before any run: the design alone is no gap, every designed job is not yet run.
    assert check([], SETTINGS, design=design) == []
    assert len(not_yet_run(design, set())) == len(DATASETS) + len(CHECKS)
    # Without a design, an asset that never ran is still a missing edge.
    assert any(gap.startswith("missing edge") for gap in check([], SETTINGS))


def test_a_run_with_an_edge_the_design_lacks_is_reported_against_the_design(asset_graph):
    log = pipeline()
    archive = ARCHIVE.identity(SETTINGS)
    for event in log:
        if event["job"]["name"] == SUPPLIER_STATS.job.lineage_name and event["eventType"] == "COMPLETE":
            event["inputs"].append({"namespace": archive.namespace, "name": archive.name, "facets": {}})
    job = f"{SETTINGS.lineage_namespace}/{SUPPLIER_STATS.job.lineage_name}"
    gaps = check(log, SETTINGS, design=published(asset_graph))
    assert (
        f"beside the design: job {job} ran reading {archive.namespace}:{archive.name}, which its design does not"
        in gaps
    )


def test_a_dataset_written_with_other_columns_than_its_published_schema_is_a_gap(asset_graph):
    wider = specs_with_one_more_column(asset_graph, LAKEHOUSE_ORDERS.key).resolve_asset_graph()
    design = PublishedDesign.from_events(designed(wider))  # published before the column was dropped again
    identity = LAKEHOUSE_ORDERS.identity(SETTINGS)
    (gap,) = [gap for gap in check(pipeline(), SETTINGS, design=design) if gap.startswith("beside the design")]
    assert gap.startswith(
        f"beside the design: job {SETTINGS.lineage_namespace}/{LAKEHOUSE_ORDERS.job.lineage_name} wrote "
        f"{identity.namespace}:{identity.name} with columns (order_id string"
    )
    assert gap.endswith("bid_time timestamp_ntz, discount decimal(10,2))")


def test_an_asset_removed_from_the_definitions_is_retired_once_and_comes_back_when_restored(asset_graph, tmp_path):
    emitter = LineageEmitter(tmp_path)
    everything = asset_designs(asset_graph)
    publish(design_events(everything, SETTINGS), emitter)
    without = [design for design in everything if design.key != SUPPLIER_STATS.key]
    identity = SUPPLIER_STATS.identity(SETTINGS)
    job = f"job {SETTINGS.lineage_namespace}/{SUPPLIER_STATS.job.lineage_name}"
    dataset = f"dataset {identity.namespace} {identity.name}"

    removed = publish(design_events(without, SETTINGS), emitter)
    assert removed.sent == () and sorted(removed.retired) == sorted([job, dataset])
    design = PublishedDesign.from_events(emitter.design())
    assert job.removeprefix("job ") not in design.jobs and identity.node not in design.schemas
    assert design.retired == {(SETTINGS.lineage_namespace, SUPPLIER_STATS.job.lineage_name)}  # to hide in Marquez
    for event in emitter.design()[-2:]:
        assert validate_event(event) == []
    (dropped,) = [e for e in emitter.design()[-2:] if "dataset" in e]
    assert dropped["dataset"]["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "DROP"
    (emptied,) = [e for e in emitter.design()[-2:] if "job" in e]
    assert emptied["inputs"] == [] and emptied["outputs"] == []

    assert publish(design_events(without, SETTINGS), emitter) == Published((), len(without) * 2 + len(CHECKS), ())
    restored = publish(design_events(everything, SETTINGS), emitter)
    assert sorted(restored.sent) == sorted([job, dataset]) and restored.retired == ()
    design = PublishedDesign.from_events(emitter.design())
    assert job.removeprefix("job ") in design.jobs and design.retired == frozenset()

"""The designed graph in Marquez before anything runs: `lineage publish` on the test stack, read back
through Marquez's API and drawn by its web UI. On a namespace, topics and tables of its own, so no
run of any other test is in the graph it reads."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import uuid

import pytest

from lineage_assets.assets.design import asset_designs, publish_design
from lineage_assets.datasets import CHECKS, DATASETS, LAKEHOUSE_ORDERS, ORDERS, SUPPLIER_STATS
from lineage_assets.definitions import build_definitions, publish_definitions
from lineage_assets.lineage.check import check_marquez, check_marquez_with_design, log_design
from lineage_assets.lineage.emitter import emitter_for
from lineage_assets.lineage.facets import PRODUCER
from lineage_assets.lineage.marquez import MarquezApi, dataset_node, lineage_nodes, lineage_page
from lineage_assets.resources.settings import SettingsResource
from tests.e2e.test_marquez_ui import nodes, settled
from tests.marquez_graph import job_node

DELIVERY_TIMEOUT_S = 90


@pytest.fixture(scope="module")
def designed(stack, settings, tmp_path_factory):
    """The design of a pipeline that never ran, published and delivered to the test stack's Marquez."""
    probe = dataclasses.replace(
        settings,
        state_dir=tmp_path_factory.mktemp("design-state"),
        lineage_namespace="design_probe",
        orders_topic="design-orders",
        supplier_stats_topic="design-supplier-stats",
        suppliers_topic="design-suppliers",  # a dataset of its own: no edge into the shared pipeline's graph
        archive_prefix="design-orders",
        iceberg_namespace="design_probe",
    )
    first = publish_definitions(probe)
    assert emitter_for(probe).flush(timeout=DELIVERY_TIMEOUT_S), "the design was not delivered to Marquez"
    return probe, first


def test_marquez_shows_every_asset_job_and_dataset_with_their_edges_before_any_run(designed):
    probe, first = designed
    api = MarquezApi.of(probe)
    assert len(first.sent) == 2 * len(DATASETS) + len(CHECKS) and first.unchanged == 0

    jobs, datasets = lineage_nodes(api, *SUPPLIER_STATS.identity(probe).node)
    assert jobs == {f"design_probe/{d.job.lineage_name}" for d in DATASETS.values()} | {
        f"design_probe/{c.lineage_name}" for c in CHECKS.values()
    }
    assert datasets == {d.identity(probe).node for d in DATASETS.values()}
    assert all(job["latestRun"] is None for job in api.jobs("design_probe"))  # known from the design alone
    gaps, not_yet_run = check_marquez_with_design(api, probe, emitter_for(probe).log)
    assert gaps == [] and len(not_yet_run) == len(DATASETS) + len(CHECKS)
    graph = api.lineage(*SUPPLIER_STATS.identity(probe).node)["graph"]
    edges = {(edge["origin"], edge["destination"]) for node in graph for edge in node["inEdges"] + node["outEdges"]}
    expected = set()
    for dataset in DATASETS.values():
        job = job_node("design_probe", dataset.job.lineage_name)
        expected.add((job, dataset_node(*dataset.identity(probe).node)))
        expected |= {(dataset_node(*DATASETS[key].identity(probe).node), job) for key in dataset.upstream}
    expected |= {
        (dataset_node(*DATASETS[c.dataset].identity(probe).node), job_node("design_probe", c.lineage_name))
        for c in CHECKS.values()
    }
    assert edges == expected
    for dataset in DATASETS.values():
        shown = api.dataset(*dataset.identity(probe).node)
        # Marquez lists a dataset's fields in an order of its own.
        assert sorted((f["name"], f["type"]) for f in shown["fields"]) == sorted(
            (c.name, c.type) for c in dataset.columns
        )
        assert {t["key"] for t in shown["facets"]["tags"]["tags"]} >= {"dagster.asset_key", "dagster.group"}


def direct_sources(api: MarquezApi, namespace: str, name: str, field: str) -> set[tuple[str, str, str]]:
    """Every field whose value a dataset's field is made from (DIRECT), transitively, by the column
    lineage Marquez shows each dataset with."""
    found, frontier = set(), [(namespace, name, field)]
    while frontier:
        namespace, name, field = frontier.pop()
        facet = (api.dataset(namespace, name).get("facets") or {}).get("columnLineage") or {}
        for source in (facet.get("fields") or {}).get(field, {}).get("inputFields", []):
            if not any(t["type"] == "DIRECT" for t in source.get("transformations") or []):
                continue
            hop = (source["namespace"], source["name"], source["field"])
            if hop not in found:
                found.add(hop)
                frontier.append(hop)
    return found


def test_marquez_shows_the_declared_column_lineage_back_to_the_topic_price(designed):
    probe, _ = designed
    api = MarquezApi.of(probe)
    sources = direct_sources(api, *SUPPLIER_STATS.identity(probe).node, "total_price")
    assert sources == {(*LAKEHOUSE_ORDERS.identity(probe).node, "price"), (*ORDERS.identity(probe).node, "price")}


def test_publishing_again_sends_nothing_new(designed):
    probe, _ = designed
    api = MarquezApi.of(probe)
    # Each dataset event Marquez takes makes a version of its dataset: none may be added.
    before = {key: len(list(api.dataset_versions(*d.identity(probe).node))) for key, d in DATASETS.items()}
    again = publish_definitions(probe)
    assert again.sent == () and again.unchanged == 2 * len(DATASETS) + len(CHECKS)
    assert emitter_for(probe).flush(timeout=DELIVERY_TIMEOUT_S)
    assert {key: len(list(api.dataset_versions(*d.identity(probe).node))) for key, d in DATASETS.items()} == before


def test_marquez_web_draws_the_designed_graph(designed, browser_page, screenshots):
    probe, _ = designed
    page = browser_page
    stats = SUPPLIER_STATS.identity(probe)
    page.goto(lineage_page(probe, stats.namespace, stats.name, depth=10))
    page.get_by_label("Full Graph").check()
    graph = page.get_by_test_id("zoom-pan-group")
    nodes(graph, "JOB").nth(len(DATASETS) + len(CHECKS) - 1).wait_for()
    assert nodes(graph, "JOB").count() == len(DATASETS) + len(CHECKS)
    assert nodes(graph, "DATASET").count() == len(DATASETS)
    settled(nodes(graph, "DATASET").last.locator("text").nth(1))
    page.screenshot(path=screenshots / "marquez-designed-graph.png", full_page=True)


def test_an_asset_removed_from_the_definitions_is_dropped_and_its_job_hidden_in_marquez(designed):
    """Published without `lakehouse/supplier_stats`: its dataset is DROPped in Marquez, and its job,
    once its retirement is delivered, hidden (Marquez would keep drawing a job's last edges)."""
    probe, _ = designed
    api = MarquezApi.of(probe)
    job = SUPPLIER_STATS.job.lineage_name
    everything = asset_designs(build_definitions(SettingsResource.of(probe)).resolve_asset_graph())
    retired = publish_design([a for a in everything if a.key != SUPPLIER_STATS.key], probe)
    assert len(retired.retired) == 2 and retired.hidden == (f"design_probe/{job}",)
    assert emitter_for(probe).pending() == 0
    assert api.dataset(*SUPPLIER_STATS.identity(probe).node)["lastLifecycleState"] == "DROP"
    assert job not in {shown["name"] for shown in api.jobs("design_probe")}
    jobs, _ = lineage_nodes(api, *LAKEHOUSE_ORDERS.identity(probe).node)
    assert f"design_probe/{job}" not in jobs and jobs  # the rest of the design stays drawn

    restored = publish_design(everything, probe)  # the other tests' design again
    assert len(restored.sent) == 2 and emitter_for(probe).flush(timeout=DELIVERY_TIMEOUT_S)
    assert job in {shown["name"] for shown in api.jobs("design_probe")}


def run_beside_the_design(probe) -> list[str]:
    """A run of the designed `supplier_stats` job as a changed Spark script would report it: reading a
    table its design does not, writing a column more, and total_price summed from `item`."""
    lakehouse_orders, supplier_stats = LAKEHOUSE_ORDERS.identity(probe), SUPPLIER_STATS.identity(probe)
    fields = [{"name": c.name, "type": c.type} for c in SUPPLIER_STATS.columns] + [
        {"name": "discount", "type": "decimal(10,2)"}
    ]
    wrong_sum = {"type": "DIRECT", "subtype": "AGGREGATION", "description": "SUM(item)", "masking": False}
    output = {
        "namespace": supplier_stats.namespace,
        "name": supplier_stats.name,
        "facets": {
            "schema": {
                "_producer": PRODUCER,
                "_schemaURL": "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet",
                "fields": fields,
            },
            "columnLineage": {
                "_producer": PRODUCER,
                "_schemaURL": "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet",
                "fields": {
                    "total_price": {
                        "inputFields": [
                            {
                                **dict(zip(("namespace", "name"), lakehouse_orders.node)),
                                "field": "item",
                                "transformations": [wrong_sum],
                            }
                        ]
                    }
                },
            },
        },
    }
    run_id, emitter = str(uuid.uuid4()), emitter_for(probe)
    for state in ("START", "COMPLETE"):
        emitter.emit(
            json.dumps(
                {
                    "eventType": state,
                    "eventTime": dt.datetime.now(dt.UTC).isoformat(),
                    "producer": PRODUCER,
                    "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
                    "run": {"runId": run_id},
                    "job": {"namespace": "design_probe", "name": SUPPLIER_STATS.job.lineage_name},
                    "inputs": [
                        dict(zip(("namespace", "name"), lakehouse_orders.node)),
                        {"namespace": supplier_stats.namespace, "name": "design_probe/discounts"},
                    ],
                    "outputs": [output],
                }
            )
        )
    assert emitter.flush(timeout=DELIVERY_TIMEOUT_S)
    job = f"design_probe/{SUPPLIER_STATS.job.lineage_name}"
    return [
        f"beside the design: job {job} ran reading {supplier_stats.namespace}:design_probe/discounts, which its "
        "design does not",
        f"beside the design: job {job} wrote {supplier_stats.namespace}:{supplier_stats.name} with columns (",
    ]


def test_a_run_beside_the_design_is_reported_from_marquez_also_after_the_design_is_published_again(designed):
    """Marquez makes the design's dataset events the datasets' current versions: what a run wrote is
    still what the check reads, so a republished design never hides a run's wrong column lineage."""
    probe, _ = designed
    api = MarquezApi.of(probe)
    beside = run_beside_the_design(probe)
    for republished in (False, True):
        if republished:
            assert len(publish_definitions(probe, force=True).sent) == 2 * len(DATASETS) + len(CHECKS)
            assert emitter_for(probe).flush(timeout=DELIVERY_TIMEOUT_S)
        gaps = check_marquez(api, probe, design=log_design(emitter_for(probe).log))
        assert beside[0] in gaps, gaps
        (schema,) = [gap for gap in gaps if gap.startswith(beside[1])]
        assert "discount decimal(10,2)" in schema.split("its published schema")[0]
        total_price = [gap for gap in gaps if "lakehouse/supplier_stats.total_price" in gap]
        assert any("lakehouse/orders.item" in gap for gap in total_price), gaps
        assert any("lakehouse/orders.price" in gap for gap in total_price), gaps

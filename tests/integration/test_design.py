"""The designed graph in Marquez before anything runs: `lineage publish` on the test stack, read back
through Marquez's API and drawn by its web UI. On a namespace, topics and tables of its own, so no
run of any other test is in the graph it reads."""

from __future__ import annotations

import dataclasses

import pytest

from lineage_assets.assets.design import asset_designs
from lineage_assets.datasets import CHECKS, DATASETS, SUPPLIER_STATS
from lineage_assets.definitions import build_definitions, publish_definitions
from lineage_assets.lineage.design import design_events, publish
from lineage_assets.lineage.emitter import emitter_for
from lineage_assets.lineage.marquez import MarquezApi, dataset_node, job_node, lineage_nodes
from lineage_assets.resources.settings import SettingsResource
from tests.e2e.test_marquez_ui import lineage_url, nodes, settled

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
        archive_prefix="design-orders",
        iceberg_namespace="design_probe",
    )
    first = publish_definitions(probe)
    assert emitter_for(probe).flush(timeout=DELIVERY_TIMEOUT_S), "the design was not delivered to Marquez"
    return probe, first


def test_marquez_shows_every_asset_job_and_dataset_with_their_edges_before_any_run(designed):
    probe, first = designed
    api = MarquezApi(probe.marquez_api_url)
    assert len(first.sent) == 2 * len(DATASETS) + len(CHECKS) and first.unchanged == 0

    jobs, datasets = lineage_nodes(api, *SUPPLIER_STATS.identity(probe).node)
    assert jobs == {f"design_probe/{d.job.lineage_name}" for d in DATASETS.values()} | {
        f"design_probe/{c.lineage_name}" for c in CHECKS.values()
    }
    assert datasets == {d.identity(probe).node for d in DATASETS.values()}
    assert all(job["latestRun"] is None for job in api.jobs("design_probe"))  # known from the design alone
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


def test_publishing_again_sends_nothing_new(designed):
    probe, _ = designed
    api = MarquezApi(probe.marquez_api_url)
    # Each dataset event Marquez takes makes a version of its dataset: none may be added.
    before = {key: len(api.dataset_versions(*d.identity(probe).node)) for key, d in DATASETS.items()}
    again = publish_definitions(probe)
    assert again.sent == () and again.unchanged == 2 * len(DATASETS) + len(CHECKS)
    assert emitter_for(probe).flush(timeout=DELIVERY_TIMEOUT_S)
    assert {key: len(api.dataset_versions(*d.identity(probe).node)) for key, d in DATASETS.items()} == before


def test_marquez_web_draws_the_designed_graph(designed, browser_page, screenshots):
    probe, _ = designed
    page = browser_page
    page.goto(lineage_url(probe, SUPPLIER_STATS, depth=10))
    page.get_by_label("Full Graph").check()
    graph = page.get_by_test_id("zoom-pan-group")
    nodes(graph, "JOB").nth(len(DATASETS) + len(CHECKS) - 1).wait_for()
    assert nodes(graph, "JOB").count() == len(DATASETS) + len(CHECKS)
    assert nodes(graph, "DATASET").count() == len(DATASETS)
    settled(nodes(graph, "DATASET").last.locator("text").nth(1))
    page.screenshot(path=screenshots / "marquez-designed-graph.png", full_page=True)


def test_an_asset_removed_from_the_definitions_is_dropped_in_marquez(designed):
    """Published without `lakehouse/supplier_stats`: its dataset is DROPped in Marquez. (Its job keeps
    its edges there: Marquez 0.51.1 keeps a job's last inputs and outputs when a version with none
    arrives, so the job stays drawn until it is hidden through Marquez's API.)"""
    probe, _ = designed
    api = MarquezApi(probe.marquez_api_url)
    emitter = emitter_for(probe)
    everything = asset_designs(build_definitions(SettingsResource.of(probe)).resolve_asset_graph())
    retired = publish(design_events([a for a in everything if a.key != SUPPLIER_STATS.key], probe), emitter)
    assert len(retired.retired) == 2
    assert emitter.flush(timeout=DELIVERY_TIMEOUT_S)
    assert api.dataset(*SUPPLIER_STATS.identity(probe).node)["lastLifecycleState"] == "DROP"
    restored = publish(design_events(everything, probe), emitter)  # the other tests' design again
    assert len(restored.sent) == 2 and emitter.flush(timeout=DELIVERY_TIMEOUT_S)

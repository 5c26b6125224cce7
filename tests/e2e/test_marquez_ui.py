"""The lineage in Marquez's own web UI (the stack's `marquez-web`) after the end-to-end run, in headless Chromium.

The user opens the lineage page of the supplier_stats table, switches on *Full Graph* to see the
whole graph around it (by default the page draws only the table's upstream path), and finds every
asset's job and dataset, wired as the asset graph is. Node labels are cut short by the UI (16 or 15
characters), so the full names are read the way a person would: from the tooltip of each node. The
edges' element ids carry the full node ids, so the wiring is checked on them.
Screenshots go to artifacts/screenshots/.
"""

from __future__ import annotations

from collections import Counter
from urllib.parse import quote

import pytest
from playwright.sync_api import expect

from lineage_assets.datasets import CHECKS, DATASETS, LAKEHOUSE_ORDERS, SUPPLIER_STATS
from lineage_assets.lineage.emitter import emitter_for
from lineage_assets.lineage.marquez import dataset_node, lineage_page
from tests.marquez_graph import job_node
from tests.suite import SHARED_PIPELINE

pytestmark = pytest.mark.xdist_group(SHARED_PIPELINE)  # the test stack's own topics, tables and lineage

DELIVERY_TIMEOUT_S = 90  # as in test_marquez.py: a sender backing off from Marquez waits up to 30 s between tries
# What marquez-web does to names on the graph's nodes (web/src/routes/table-level/*Node.tsx: truncateText).
JOB_LABEL_CHARS, DATASET_LABEL_CHARS = 16, 15
TOOLTIP_CHARS = 40  # a tooltip shows a namespace or name longer than this by its end: "..." and the last 40


@pytest.fixture(scope="module")
def delivered(runs, settings):
    assert emitter_for(settings).flush(timeout=DELIVERY_TIMEOUT_S), "the event log was not delivered to Marquez"


@pytest.fixture
def page(browser_page, delivered):
    return browser_page


def label(name: str, chars: int) -> str:
    return name if len(name) <= chars else f"{name[:chars]}..."


def as_tooltip(identity: tuple[str, str]) -> tuple[str, str]:
    return tuple(part if len(part) <= TOOLTIP_CHARS else f"...{part[-TOOLTIP_CHARS:]}" for part in identity)


def node_id(settings, dataset) -> tuple[str, str]:
    """Marquez's ids of a dataset and of the job that writes it."""
    return dataset_node(*dataset.identity(settings).node), job_node(
        settings.lineage_namespace, dataset.job.lineage_name
    )


def upstream_of(dataset) -> set[str]:
    """The dataset's key and the keys of every dataset it is computed from, directly or not."""
    keys = {dataset.key}
    for key in dataset.upstream:
        keys |= upstream_of(DATASETS[key])
    return keys


def nodes(graph, kind: str):
    """The graph's nodes of one kind ("JOB" or "DATASET"): each node's label group holds the kind and the name."""
    return graph.locator(f"g:has(> text:text-is('{kind}'))")


def settled(element) -> None:
    """Wait until ``element`` stands still: the UI zooms the graph to fit, animated, after each layout."""
    element.hover(trial=True)


def tooltip_identity(page, node) -> tuple[str, str]:
    """(namespace, name) from a node's tooltip, opened by pointing at the node's name."""
    node.locator("text").nth(1).hover()
    tooltip = page.get_by_role("tooltip").filter(has_text="Name:")
    lines = tooltip.inner_text().splitlines()
    page.mouse.move(0, 0)
    tooltip.wait_for(state="hidden")
    return lines[lines.index("Namespace:") + 1], lines[lines.index("Name:") + 1]


def test_marquez_web_shows_the_lineage_graph_of_supplier_stats_with_every_asset_job_and_dataset(
    page, settings, screenshots
):
    jobs = {
        (settings.lineage_namespace, name)
        for name in [  # the asset checks' jobs too: the run evaluated them
            *(d.job.lineage_name for d in DATASETS.values()),
            *(c.lineage_name for c in CHECKS.values()),
        ]
    }
    datasets = {(d.identity(settings).namespace, d.identity(settings).name) for d in DATASETS.values()}
    # Deep enough for the farthest node: the archive's check, seven hops from supplier_stats.
    stats = SUPPLIER_STATS.identity(settings)
    page.goto(lineage_page(settings, stats.namespace, stats.name, depth=10))  # as the demo links it
    page.get_by_text("Table Level", exact=True).wait_for()
    graph = page.get_by_test_id("zoom-pan-group")  # the graph itself (the minimap draws the nodes again)

    # By default: the table's path only, from the generator through the topic and the orders table, and
    # on to the table computed from it (supplier_revenue).
    readers = {d.key for d in DATASETS.values() if SUPPLIER_STATS.key in d.upstream}
    expect(nodes(graph, "JOB")).to_have_count(len(upstream_of(SUPPLIER_STATS)) + len(readers))
    settled(nodes(graph, "DATASET").last.locator("text").nth(1))
    page.screenshot(path=screenshots / "marquez-lineage-supplier_stats-upstream.png", full_page=True)

    # Full Graph: the streaming jobs that read the same topic, and what they write, too.
    page.get_by_label("Full Graph").check()
    expect(nodes(graph, "JOB")).to_have_count(len(jobs))
    expect(nodes(graph, "DATASET")).to_have_count(len(datasets))
    for kind, names, chars in (("JOB", jobs, JOB_LABEL_CHARS), ("DATASET", datasets, DATASET_LABEL_CHARS)):
        labels = nodes(graph, kind).evaluate_all("groups => groups.map(g => g.querySelectorAll('text')[1].textContent)")
        assert Counter(labels) == Counter(label(name, chars) for _, name in names), kind
    assert {tooltip_identity(page, node) for node in nodes(graph, "JOB").all()} == set(map(as_tooltip, jobs))
    assert {tooltip_identity(page, node) for node in nodes(graph, "DATASET").all()} == set(map(as_tooltip, datasets))

    # The edges: each job writes its dataset and reads its asset's upstream datasets, each check's
    # job reads the asset it checks, nothing else.
    expected_edges = set()
    for dataset in DATASETS.values():
        written, job = node_id(settings, dataset)
        expected_edges.add(f"{job}-{written}")
        expected_edges |= {f"{node_id(settings, DATASETS[key])[0]}-{job}" for key in dataset.upstream}
    expected_edges |= {
        f"{node_id(settings, DATASETS[c.dataset])[0]}-{job_node(settings.lineage_namespace, c.lineage_name)}"
        for c in CHECKS.values()
    }
    edges = graph.locator("polyline[id]:not([id$='-animated'])").evaluate_all("lines => lines.map(l => l.id)")
    assert Counter(edges) == Counter(expected_edges)
    page.screenshot(path=screenshots / "marquez-lineage-supplier_stats.png", full_page=True)


def test_marquez_web_column_lineage_of_supplier_stats_leads_total_price_back_to_price(page, settings, screenshots):
    stats, lakehouse = SUPPLIER_STATS.identity(settings), LAKEHOUSE_ORDERS.identity(settings)
    page.goto(
        f"{settings.marquez_web_url}/datasets/column-level/"
        f"{quote(stats.namespace, safe='')}/{quote(stats.name, safe='')}"
    )
    graph = page.get_by_test_id("zoom-pan-group")
    for column in ("total_price", "price"):
        graph.locator(f"text:text-is('{column}')").first.wait_for()
    # The UI's edge from the orders table's price to supplier_stats' total_price (Marquez's column node ids).
    edge = (
        f"datasetField:{lakehouse.namespace}:{lakehouse.name}:price-"
        f"datasetField:{stats.namespace}:{stats.name}:total_price"
    )
    expect(graph.locator(f"polyline[id='{edge}']")).to_have_count(1)
    settled(graph.locator("text:text-is('total_price')").first)
    page.screenshot(path=screenshots / "marquez-column-lineage-supplier_stats.png", full_page=True)

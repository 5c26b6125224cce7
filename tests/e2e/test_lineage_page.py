"""`lineage-assets lineage show` after the end-to-end run, looked at in headless Chromium."""

from __future__ import annotations

import pytest

from lineage_assets.cli import main
from lineage_assets.datasets import CHECKS, DATASETS, LAKEHOUSE_ORDERS, ORDERS, SUPPLIER_REVENUE, SUPPLIER_STATS
from lineage_assets.settings_environment import as_environment
from tests.suite import SHARED_PIPELINE

pytestmark = pytest.mark.xdist_group(SHARED_PIPELINE)  # the test stack's own topics, tables and lineage


@pytest.fixture(scope="module")
def lineage_page(runs, settings, tmp_path_factory):
    folder = tmp_path_factory.mktemp("lineage-page")
    with pytest.MonkeyPatch.context() as environment:
        for variable, value in as_environment(settings).items():
            environment.setenv(variable, value)
        assert (
            main(["lineage", "show", "--out", str(folder / "lineage.html"), "--png", str(folder / "lineage.png")]) == 0
        )
    return folder


@pytest.fixture
def page(browser_page, lineage_page):
    browser_page.goto((lineage_page / "lineage.html").as_uri())
    return browser_page


def test_the_page_shows_every_asset_and_job_of_the_graph_with_its_last_run_state(page, settings, screenshots):
    for dataset in DATASETS.values():
        identity = dataset.identity(settings)
        box = page.locator(f'g.dataset[data-id="dataset:{identity.namespace}:{identity.name}"]')
        assert box.locator("text.title").text_content() == dataset.key
        job = page.locator(f'g.job[data-id="{settings.lineage_namespace}/{dataset.job.lineage_name}"]')
        assert job.count() == 1, dataset.job.name
        # After catch-up runs nothing is left running; a job's colour is its last run's end.
        assert job.locator("text.state").text_content() in {"COMPLETE", "FAIL"}
    for check in CHECKS.values():  # each check evaluated is a job reading the asset it checks
        assert page.locator(f'g.job[data-id="{settings.lineage_namespace}/{check.lineage_name}"]').count() == 1, (
            check.name
        )
    assert page.locator("g.job").count() == len(DATASETS) + len(CHECKS)
    assert page.locator("g.dataset").count() == len(DATASETS)
    stats_job = page.locator(f'g.job[data-id="{settings.lineage_namespace}/{SUPPLIER_STATS.job.lineage_name}"]')
    assert "state-complete" in stats_job.get_attribute("class")
    assert stats_job.locator("g.nested").count() == 1, "the Spark application is listed inside the asset's job"
    assert page.locator("path.edge.nested-only").count() == 0, "Spark named a dataset the asset graph does not have"
    page.screenshot(path=screenshots / "lineage-page.png", full_page=True)


def test_column_edges_appear_on_demand_and_a_click_follows_a_column_to_its_sources(page, settings, screenshots):
    edges = page.locator("path.column-edge")
    assert edges.count() >= len(
        {
            (d.key, column, s.dataset, s.column)
            for d in DATASETS.values()
            for column, sources in d.expected_lineage.items()
            for s in sources
        }
    )
    assert not edges.first.is_visible()
    page.get_by_label("column lineage").check()
    assert edges.first.is_visible()

    def row(dataset, column):
        identity = dataset.identity(settings)
        return page.locator(f'g.column[data-key="dataset:{identity.namespace}:{identity.name}|{column}"]')

    # Following supplier_stats.total_price highlights exactly its declared upstream columns (price
    # through the cast, bid_time through the grouping), back to the topic, and its downstream ones.
    declared_edges = set()
    frontier = [(SUPPLIER_STATS.key, "total_price")]
    while frontier:
        key, column = frontier.pop()
        for source in DATASETS[key].expected_lineage.get(column, ()):
            declared_edges.add(((source.dataset, source.column), (key, column)))
            frontier.append((source.dataset, source.column))
    # And what is computed from it, forward: supplier_revenue's revenue and rank.
    frontier = [(SUPPLIER_STATS.key, "total_price")]
    while frontier:
        source = frontier.pop()
        for dataset in DATASETS.values():
            for column, sources in dataset.expected_lineage.items():
                edge = (source, (dataset.key, column))
                if edge not in declared_edges and any((s.dataset, s.column) == source for s in sources):
                    declared_edges.add(edge)
                    frontier.append((dataset.key, column))
    columns = {end for edge in declared_edges for end in edge}
    assert (ORDERS.key, "price") in columns and (LAKEHOUSE_ORDERS.key, "price") in columns
    assert (SUPPLIER_REVENUE.key, "revenue") in columns

    row(SUPPLIER_STATS, "total_price").click()
    highlighted = {element.get_attribute("data-key") for element in page.locator("g.column.highlight").all()}
    assert highlighted == {row(DATASETS[key], column).get_attribute("data-key") for key, column in columns}
    assert page.locator("path.column-edge.highlight").count() == len(declared_edges)
    page.screenshot(path=screenshots / "total_price-followed.png", full_page=True)


def test_the_png_shows_the_drawing(lineage_page):
    png = (lineage_page / "lineage.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 20_000

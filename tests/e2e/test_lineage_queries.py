"""`lineage-assets lineage impact / trace` after the end-to-end run: the same answer from the event
log and from Marquez (the real server in the test stack)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from lineage_assets.datasets import LAKEHOUSE_ORDERS, SUPPLIER_STATS
from lineage_assets.lineage.emitter import emitter_for
from lineage_assets.lineage.facets import PRODUCER
from lineage_assets.lineage.queries import ask
from lineage_assets.settings_environment import as_environment
from tests.suite import SHARED_PIPELINE

pytestmark = pytest.mark.xdist_group(SHARED_PIPELINE)  # the test stack's own topics, tables and lineage


def lineage_command(settings, *arguments) -> subprocess.CompletedProcess:
    command = [os.path.join(os.path.dirname(sys.executable), "lineage-assets"), "lineage", *arguments]
    return subprocess.run(
        command, env={**os.environ, **as_environment(settings)}, capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def answers(marquez, settings) -> dict:
    """Each query's JSON answer as the command prints it, from each source."""
    found = {}
    for query, subject in (
        ("impact", "orders.price"),
        ("trace", "lakehouse/supplier_stats.total_price"),
        ("impact", "orders"),
    ):
        for source in ("log", "marquez"):
            done = lineage_command(settings, query, subject, "--json", "--source", source)
            assert done.returncode == 0, done.stderr[-2000:]
            found[(query, subject, source)] = json.loads(done.stdout)
    return found


@pytest.mark.parametrize(
    "query, subject",
    [("impact", "orders.price"), ("trace", "lakehouse/supplier_stats.total_price"), ("impact", "orders")],
)
def test_the_log_and_marquez_give_the_same_answer(answers, query, subject):
    """The same hops, jobs, runs and datasets; a hop's transformation is the input's own in the log
    and, in Marquez (which keeps only the column's merged one), all of the column's, flagged so."""
    from_log, from_marquez = answers[(query, subject, "log")], answers[(query, subject, "marquez")]
    assert from_log["hops"], "an empty answer would agree trivially"

    def without_transformations(answer):
        return {
            **answer,
            "hops": [
                {k: v for k, v in hop.items() if k not in ("transformation", "description", "merged")}
                for hop in answer["hops"]
            ],
        }

    assert without_transformations(from_log) == without_transformations(from_marquez)
    own = {(hop["upstream"], hop["downstream"]): hop["transformation"] for hop in from_log["hops"]}
    assert not any(hop["merged"] for hop in from_log["hops"])
    for hop in from_marquez["hops"]:
        assert hop["merged"] and set(own[(hop["upstream"], hop["downstream"])].split(", ")) <= set(
            hop["transformation"].split(", ")
        ), hop


def test_impact_of_the_topic_price_reaches_the_table_the_daily_and_the_live_totals(answers, settings):
    answer = answers[("impact", "orders.price", "log")]
    hops = {(h["upstream"], h["downstream"]): (h["transformation"], h["description"], h["job"]) for h in answer["hops"]}
    assert hops[("orders.price", "lakehouse/orders.price")] == (
        "DIRECT/TRANSFORMATION, INDIRECT/FILTER",
        f"{LAKEHOUSE_ORDERS.designed.columns['price']}; rows where isnull(dead_letter_reason)",
        f"{settings.lineage_namespace}/{LAKEHOUSE_ORDERS.job.lineage_name}",
    )
    stats_type, stats_description, stats_job = hops[("lakehouse/orders.price", "lakehouse/supplier_stats.total_price")]
    assert "DIRECT/AGGREGATION" in stats_type and "cast(sum(lakehouse/orders.price) as " in stats_description
    assert stats_job == f"{settings.lineage_namespace}/{SUPPLIER_STATS.job.lineage_name}"
    live_total = hops[("orders.price", "supplier_stats_live.total_price")][1]
    assert "sum(try_cast(orders.price as decimal(10,2)))" in live_total
    assert answer["assets"] == [
        "lakehouse/orders",
        "lakehouse/supplier_revenue",
        "lakehouse/supplier_stats",
        "orders_archive",
        "supplier_stats_live",
    ]


def test_trace_of_the_daily_total_shows_each_inputs_own_transformation(answers):
    hops = {
        (h["upstream"], h["downstream"]): h
        for h in answers[("trace", "lakehouse/supplier_stats.total_price", "log")]["hops"]
    }
    total = "lakehouse/supplier_stats.total_price"
    assert hops[("lakehouse/orders.price", total)]["transformation"] == "DIRECT/AGGREGATION"
    assert hops[("lakehouse/orders.bid_time", total)]["transformation"] == "INDIRECT/FILTER, INDIRECT/GROUP_BY"
    kept = {(h["upstream"], h["downstream"]): h for h in answers[("trace", total, "marquez")]["hops"]}
    assert (
        kept[("lakehouse/orders.bid_time", total)]["transformation"]
        == "DIRECT/AGGREGATION, INDIRECT/FILTER, INDIRECT/GROUP_BY"
    )
    assert kept[("lakehouse/orders.bid_time", total)]["merged"]


def test_trace_of_the_daily_total_reaches_the_topic_price_with_each_hops_latest_complete_run(answers, settings):
    answer = answers[("trace", "lakehouse/supplier_stats.total_price", "marquez")]
    hops = {(h["upstream"], h["downstream"]): h for h in answer["hops"]}
    to_table, to_stats = (
        hops[("orders.price", "lakehouse/orders.price")],
        hops[("lakehouse/orders.price", "lakehouse/supplier_stats.total_price")],
    )
    assert LAKEHOUSE_ORDERS.designed.columns["price"] in to_table["description"]
    assert SUPPLIER_STATS.designed.columns["total_price"] in to_stats["description"]
    assert answer["assets"] == ["lakehouse/orders", "orders"]
    for hop, dataset in ((to_table, LAKEHOUSE_ORDERS), (to_stats, SUPPLIER_STATS)):
        # The latest run is the job's last run in the event log, and it completed.
        last = [
            e
            for e in emitter_for(settings).events()
            if e["job"]["name"] == dataset.job.lineage_name and e["producer"] == PRODUCER
        ][-1]
        assert (hop["latest_run"]["id"], hop["latest_run"]["state"]) == (last["run"]["runId"], "COMPLETE")


def test_the_tree_and_a_misspelt_column(marquez, settings):
    tree = lineage_command(settings, "trace", "lakehouse/supplier_stats.total_price", "--source", "marquez")
    lines = tree.stdout.splitlines()
    assert lines[0] == "trace of lakehouse/supplier_stats.total_price"
    # Marquez keeps the column's transformation over all its inputs, and the tree says so.
    assert any(
        line.lstrip("│ ")
        .lstrip("├└─ ")
        .startswith(
            "orders.price  (DIRECT/TRANSFORMATION, INDIRECT/CONDITIONAL, INDIRECT/FILTER: try_cast(orders.price"
        )
        and "Marquez keeps no per-input one" in line
        for line in lines
    )
    wrong = lineage_command(settings, "impact", "lakehouse/orders.prize")
    assert wrong.returncode == 2 and wrong.stdout == ""
    assert wrong.stderr == (
        "lineage-assets: unknown column 'prize' of lakehouse/orders: "
        "its columns are order_id, item, price, supplier, bid_time\n"
    )


def test_ask_names_a_dataset_by_its_openlineage_namespace_and_name_too(marquez, settings):
    table = LAKEHOUSE_ORDERS.identity(settings)
    by_name = ask("impact", f"{table.namespace}:{table.name}.price", settings, marquez=marquez)
    assert by_name == ask("impact", "lakehouse/orders.price", settings, marquez=marquez)
    assert [h.downstream for h in by_name.hops if h.upstream == "lakehouse/orders.price"] == [
        "lakehouse/supplier_stats.total_price"
    ]

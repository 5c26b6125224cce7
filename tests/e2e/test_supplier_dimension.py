"""The supplier dimension after the shared pipeline: its table against the generated changes, the
revenue join against the tables it read, and its lineage (the log, Marquez, provenance to the offsets
of both topics, impact) though no lineage code names these datasets."""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal

import pytest

from lineage_assets.assets.common import asset_key
from lineage_assets.assets.suppliers import SuppliersConfig
from lineage_assets.datasets import (
    LAKEHOUSE_ORDERS,
    LAKEHOUSE_SUPPLIERS,
    ORDERS,
    SUPPLIER_REVENUE,
    SUPPLIER_STATS,
    SUPPLIERS,
    iceberg_table_name,
)
from lineage_assets.demo import suppliers_config
from lineage_assets.generator import generate_suppliers
from lineage_assets.lineage.emitter import emitter_for
from lineage_assets.lineage.provenance import provenance
from lineage_assets.lineage.queries import ask
from lineage_assets.lineage.run_records import marquez_runs, runs_of
from lineage_assets.resources.kafka import KafkaResource
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.source_schemas import dead_letter_topic_of
from tests.e2e.conftest import DAY, ORDERS_CONFIG
from tests.provenance_checks import completed, without_times
from tests.suite import SHARED_PIPELINE

pytestmark = pytest.mark.xdist_group(SHARED_PIPELINE)  # the test stack's own topics, tables and lineage


def test_the_dimension_holds_each_suppliers_latest_state_and_its_bad_record_is_a_dead_letter(runs, settings, spark):
    expected = {}
    for change in generate_suppliers(SuppliersConfig(**suppliers_config(ORDERS_CONFIG)).generator()):
        if change.region is not None:  # in time order: the latest valid change stands
            expected[change.supplier] = (change.region, change.tier, change.updated_at.replace(tzinfo=None))
    table = spark.table(iceberg_table_name(settings, "suppliers")).collect()
    assert {r.supplier: (r.region, r.tier, r.updated_at) for r in table} == expected
    assert len(table) == len(expected)  # one row per supplier
    kafka = KafkaResource(environment=SettingsResource.of(settings))
    assert sum(kafka.end_offsets(dead_letter_topic_of(settings.suppliers_topic)).values()) == 1


def revenue_day_event(settings) -> dict:
    """The COMPLETE event of the pipeline's run of `supplier_revenue` for the day (the first)."""
    return next(
        event
        for event in completed(settings, SUPPLIER_REVENUE)
        if event["outputs"][0]["outputFacets"]["partitionsWritten"]["partitions"] == [DAY]
    )


def test_a_days_revenue_is_its_supplier_stats_joined_to_the_dimension_snapshot_it_read(runs, settings, spark):
    event = revenue_day_event(settings)
    read = {i["name"]: i["facets"]["version"]["datasetVersion"] for i in event["inputs"]}
    stats_snapshot = read[SUPPLIER_STATS.identity(settings).name]
    dimension_snapshot = read[LAKEHOUSE_SUPPLIERS.identity(settings).name]
    stats = spark.sql(
        f"SELECT * FROM {iceberg_table_name(settings, 'supplier_stats')} VERSION AS OF {stats_snapshot}"
    ).where(f"bid_date = DATE'{DAY}'")
    dimension = {
        r.supplier: (r.region, r.tier)
        for r in spark.sql(
            f"SELECT * FROM {iceberg_table_name(settings, 'suppliers')} VERSION AS OF {dimension_snapshot}"
        ).collect()
    }
    totals: dict[str, list] = defaultdict(lambda: [Decimal("0"), 0])
    for row in stats.collect():
        totals[row.supplier][0] += row.total_price
        totals[row.supplier][1] += row.total_count
    by_region: dict[str | None, list[str]] = defaultdict(list)
    for name in totals:
        by_region[dimension.get(name, (None, None))[0]].append(name)
    expected = set()
    for region, names in by_region.items():
        ranked = sorted(names, key=lambda n: (-totals[n][0], n))
        for name in names:
            rank = 1 + sum(totals[other][0] > totals[name][0] for other in ranked)
            expected.add((name, region, dimension.get(name, (None, None))[1], totals[name][0], totals[name][1], rank))
    written = spark.table(iceberg_table_name(settings, "supplier_revenue")).where(f"bid_date = DATE'{DAY}'")
    assert {(r.supplier, r.region, r.tier, r.revenue, r.orders, r.region_rank) for r in written.collect()} == expected
    first, _ = runs
    assert all(first.checks[name] for name in SUPPLIER_REVENUE.computed_by.check_names)
    rows, read_as_of = first.tables[DAY][SUPPLIER_REVENUE.key]
    assert {row["supplier"] for row in rows} == set(totals)
    # The day is over, and was before the dimension's table existed: its first state is what it read.
    assert read_as_of == {
        SUPPLIER_STATS.key: "current state",
        LAKEHOUSE_SUPPLIERS.key: "first state recorded, after the day",
    }


def test_the_revenue_lineage_names_the_join_the_aggregate_and_the_window_in_the_log_and_in_marquez(
    runs, marquez, settings
):
    event = revenue_day_event(settings)
    stats, dimension = SUPPLIER_STATS.identity(settings), LAKEHOUSE_SUPPLIERS.identity(settings)
    assert {(i["namespace"], i["name"]) for i in event["inputs"]} == {stats.node, dimension.node}
    facet = event["outputs"][0]["facets"]["columnLineage"]

    def inputs(column: str) -> set[tuple[str, str, str, str]]:
        return {
            (f["name"], f["field"], t["type"], t["subtype"])
            for f in facet["fields"][column]["inputFields"]
            for t in f["transformations"]
        }

    assert (dimension.name, "region", "DIRECT", "IDENTITY") in inputs("region")
    assert (stats.name, "total_price", "DIRECT", "AGGREGATION") in inputs("revenue")
    assert (dimension.name, "region", "DIRECT", "TRANSFORMATION") in inputs("region_rank")  # the window's partition
    # What decides every row, the join's keys, is on each column.
    joins = {
        (f["name"], f["field"])
        for column in facet["fields"].values()
        for f in column["inputFields"]
        for t in f["transformations"]
        if t["subtype"] == "JOIN"
    }
    assert joins == {(stats.name, "supplier"), (dimension.name, "supplier")}
    shown = {
        (node["data"]["field"], source["dataset"], source["field"])
        for node in marquez.column_lineage(*SUPPLIER_REVENUE.identity(settings).node, "revenue")["graph"]
        for source in node["data"]["inputFields"]
    }
    # Marquez follows revenue back through supplier_stats and lakehouse/orders to the topic's price.
    assert ("revenue", stats.name, "total_price") in shown
    assert ("total_price", LAKEHOUSE_ORDERS.identity(settings).name, "price") in shown
    assert ("price", ORDERS.identity(settings).name, "price") in shown


def offsets_read(answer: dict) -> dict[str, list]:
    """Every offset range a provenance answer's runs read, by topic dataset."""
    found: dict[str, list] = defaultdict(list)

    def walk(step: dict) -> None:
        for read in step["read"]:
            found[read["dataset"]] += read.get("offsets", [])
            for made in read["made_by"]:
                walk(made)

    for step in answer["made_by"]:
        walk(step)
    return found


def test_a_revenue_figures_provenance_reaches_the_offsets_of_both_topics_in_the_log_and_in_marquez(
    runs, marquez, settings
):
    from_log = provenance(runs_of(emitter_for(settings).events()), SUPPLIER_REVENUE, settings, partition=DAY)
    answer = from_log.as_dict()
    (revenue,) = answer["made_by"]
    made = {read["dataset"]: {step["job"].split("/")[1] for step in read["made_by"]} for read in revenue["read"]}
    assert made == {
        SUPPLIER_STATS.key: {SUPPLIER_STATS.job.lineage_name},
        LAKEHOUSE_SUPPLIERS.key: {LAKEHOUSE_SUPPLIERS.job.lineage_name},
    }
    offsets = offsets_read(answer)
    assert sum(r["end"] - r["start"] for r in offsets[ORDERS.key]) > 0
    generated = generate_suppliers(SuppliersConfig(**suppliers_config(ORDERS_CONFIG)).generator())
    assert sum(r["end"] - r["start"] for r in offsets[SUPPLIERS.key]) == len(generated)
    shown = provenance(marquez_runs(marquez, settings), SUPPLIER_REVENUE, settings, partition=DAY)
    assert without_times(shown.as_dict()) == without_times(answer)


def test_impact_of_a_suppliers_region_reaches_the_dimension_the_revenue_and_its_rank(runs, settings):
    answer = ask("impact", "suppliers.region", settings, log=emitter_for(settings).log)
    reached = {hop.downstream for hop in answer.hops}
    assert {
        "lakehouse/suppliers.region",
        "lakehouse/supplier_revenue.region",
        "lakehouse/supplier_revenue.region_rank",
    } <= reached
    assert set(answer.assets) == {LAKEHOUSE_SUPPLIERS.key, SUPPLIER_REVENUE.key}
    assert asset_key(SUPPLIER_REVENUE).to_user_string() in answer.tree()

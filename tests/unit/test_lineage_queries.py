"""Impact and trace over a lineage graph of the events the assets emit (pure logic, no servers)."""

from __future__ import annotations

import datetime as dt
import json
import uuid

import pytest
from openlineage.client.event_v2 import RunState

from lineage_assets.datasets import (
    CHECKS,
    DATASETS,
    LAKEHOUSE_ORDERS,
    LAKEHOUSE_SUPPLIERS,
    ORDERS,
    SUPPLIER_REVENUE,
    SUPPLIER_STATS,
    SUPPLIER_STATS_LIVE,
    SUPPLIERS,
)
from lineage_assets.lineage import events
from lineage_assets.lineage.graph import LineageGraph
from lineage_assets.lineage.observed import as_designed
from lineage_assets.lineage.queries import QueryError, impact, resolve, trace
from lineage_assets.lineage.run_facts import DagsterRun, RunFacts
from lineage_assets.lineage.transport import event_line
from lineage_assets.settings import Settings

SETTINGS = Settings()
T0 = dt.datetime(2026, 11, 21, 12, 0, tzinfo=dt.UTC)
NS = SETTINGS.lineage_namespace


def at(seconds: int) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def run_id(name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, name))


def run_events(dataset, name: str, *states_and_seconds) -> list[dict]:
    """The run's events, its jobs observing the lineage the catalog expects."""
    return [
        json.loads(
            event_line(
                events.asset_event(
                    state,
                    dataset,
                    None,
                    SETTINGS,
                    RunFacts(observation=as_designed(dataset)),
                    run_id=run_id(name),
                    event_time=at(second),
                )
            )
        )
        for state, second in states_and_seconds
    ]


def pipeline_events() -> list[dict]:
    """Every asset materialized once; then supplier_stats fails a second run and the ingestion is
    deployed (started, reporting progress, not ended)."""
    log = []
    for index, dataset in enumerate(DATASETS.values()):
        log += run_events(
            dataset, f"run-{dataset.key}", (RunState.START, 10 * index), (RunState.COMPLETE, 10 * index + 5)
        )
    log += run_events(SUPPLIER_STATS, "run-stats-2", (RunState.START, 100), (RunState.FAIL, 104))
    log += run_events(
        LAKEHOUSE_ORDERS, "run-deployed", (RunState.START, 110), (RunState.RUNNING, 120), (RunState.RUNNING, 130)
    )
    return log


@pytest.fixture(scope="module")
def graph() -> LineageGraph:
    return LineageGraph.from_events(pipeline_events())


def hops_of(answer) -> set[tuple[str, str, str]]:
    return {(hop.upstream, hop.downstream, hop.description) for hop in answer.hops}


def kinds_of(answer) -> dict[tuple[str, str], str]:
    return {(hop.upstream, hop.downstream): hop.transformation for hop in answer.hops}


def test_impact_of_the_topic_price_reaches_every_column_computed_from_it(graph):
    answer = impact(graph, resolve("orders.price", SETTINGS), SETTINGS)
    kinds = kinds_of(answer)
    # What is computed from it, each hop with that input's own transformation: the archive keeps it
    # (as text and inside the value bytes), the live stats and the table compute from it, and
    # supplier_stats sums the table's price.
    assert kinds[("orders.price", "orders_archive.price_text")] == "IDENTITY"
    assert kinds[("orders.price", "orders_archive.value_base64")] == "DIRECT/TRANSFORMATION"
    assert kinds[("orders.price", "supplier_stats_live.total_price")] == "DIRECT/AGGREGATION, INDIRECT/FILTER"
    assert kinds[("orders.price", "lakehouse/orders.price")] == "DIRECT/TRANSFORMATION, INDIRECT/FILTER"
    assert kinds[("lakehouse/orders.price", "lakehouse/supplier_stats.total_price")] == "DIRECT/AGGREGATION"
    assert kinds[("lakehouse/supplier_stats.total_price", "lakehouse/supplier_revenue.revenue")] == "DIRECT/AGGREGATION"
    # And what it only decides: which records are valid (the live count), which decoder reads a field.
    assert kinds[("orders.price", "supplier_stats_live.count")] == "INDIRECT/FILTER"
    assert kinds[("orders.price", "lakehouse/orders.supplier")] == "INDIRECT/CONDITIONAL, INDIRECT/FILTER"
    assert ("orders.price", "orders_archive.offset") not in kinds  # the record's metadata
    assert answer.assets == (
        "lakehouse/orders",
        "lakehouse/supplier_revenue",
        "lakehouse/supplier_stats",
        "orders_archive",
        "supplier_stats_live",
    )
    # Every job but the ones of the supplier dimension, which no order reaches.
    dimension = (ORDERS, SUPPLIERS, LAKEHOUSE_SUPPLIERS)
    assert set(answer.jobs) == {f"{NS}/{d.job.lineage_name}" for d in DATASETS.values() if d not in dimension}
    cast = next(hop for hop in answer.hops if hop.downstream == "lakehouse/orders.price")
    assert cast.job == f"{NS}/dagster.iceberg-ingestion"
    assert cast.description == "try_cast(orders.price as decimal(10,2)); rows where isnull(dead_letter_reason)"


def test_impact_names_the_asset_checks_that_ran_on_what_it_reaches(graph):
    dagster_run = DagsterRun(run_id="checks", job_name="__ephemeral_asset_job__", started_at=at(200))
    checked = LineageGraph.from_events(
        [
            *pipeline_events(),
            *(
                json.loads(event_line(events.check_event(RunState.COMPLETE, check, dagster_run, SETTINGS)))
                for check in CHECKS.values()
            ),
        ]
    )

    def checks(text: str, in_graph: LineageGraph = checked) -> tuple[str, ...]:
        return impact(in_graph, resolve(text, SETTINGS), SETTINGS).checks

    # orders_values_in_range tests lakehouse/orders.price, which the topic's price feeds.
    assert checks("orders.price") == checks("lakehouse/orders.price") == ("orders_values_in_range",)
    assert checks("lakehouse/orders.item") == ()  # no check tests lakehouse/orders.item or what it feeds
    assert checks("orders") == tuple(sorted(CHECKS))  # a dataset: every check of what it reaches
    assert checks("orders.price", graph) == ()  # no check has run
    assert impact(checked, resolve("orders.price", SETTINGS), SETTINGS).tree().splitlines()[-1] == (
        "asset checks: orders_values_in_range"
    )


def test_the_impact_tree_leads_with_the_columns_a_value_flows_into_and_counts_those_reached_only_indirectly(graph):
    answer = impact(graph, resolve("orders.price", SETTINGS), SETTINGS)
    indirect = [hop for hop in answer.hops if hop.indirect_only]
    direct = [hop for hop in answer.hops if not hop.indirect_only]
    assert indirect and direct  # the pipeline's price feeds some columns' values and filters the rows of others
    folded, every = answer.tree().splitlines(), answer.tree(indirect=True).splitlines()
    assert not [line for line in folded if "(INDIRECT/" in line and "DIRECT/" not in line.replace("INDIRECT/", "")]
    # Under the subject: its own INDIRECT-only edges, counted on the last line of its branches.
    (top,) = [line for line in folded if line.startswith("└── … and ")]
    from_subject = [hop for hop in indirect if hop.upstream == "orders.price"]
    assert top == f"└── … and {len(from_subject)} more it reaches only through INDIRECT edges (`--all` lists them)"
    assert len(from_subject) > 0 and len(every) > len(folded)
    for hop in indirect:
        assert any(f"── {hop.downstream}  ({hop.transformation}:" in line for line in every)
    # What is reached is the same either way: the datasets, jobs and assets lines.
    assert folded[-4:] == every[-4:]


def test_impact_of_a_column_nothing_reads_is_empty(graph):
    answer = impact(graph, resolve("lakehouse/supplier_revenue.revenue", SETTINGS), SETTINGS)
    assert (answer.hops, answer.datasets, answer.jobs) == ((), (), ())
    assert answer.tree().splitlines()[0] == "impact of lakehouse/supplier_revenue.revenue: no column lineage"


def test_impact_of_a_dataset_also_names_readers_that_report_no_column_lineage(graph):
    report = {"namespace": "s3://reports", "name": "daily"}
    revenue = SUPPLIER_REVENUE.identity(SETTINGS)
    reader = {
        "eventType": "COMPLETE",
        "eventTime": at(200).isoformat(),
        "run": {"runId": run_id("report")},
        "job": {"namespace": NS, "name": "report"},
        "inputs": [{"namespace": revenue.namespace, "name": revenue.name}],
        "outputs": [report],
    }
    answer = impact(
        LineageGraph.from_events([*pipeline_events(), reader]),
        resolve("lakehouse/supplier_revenue", SETTINGS),
        SETTINGS,
    )
    assert answer.jobs == (f"{NS}/report",)
    assert [(d.asset_key, d.label) for d in answer.datasets] == [(None, "s3://reports:daily")]


def test_trace_of_total_price_reaches_the_topic_fields_with_each_hops_latest_run(graph):
    answer = trace(graph, resolve("lakehouse/supplier_stats.total_price", SETTINGS), SETTINGS)
    # Each input with its own transformation, not the column's merged one.
    kinds = kinds_of(answer)
    assert {hop for hop in kinds if hop[1] == "lakehouse/supplier_stats.total_price"} == {
        ("lakehouse/orders.price", "lakehouse/supplier_stats.total_price"),
        ("lakehouse/orders.bid_time", "lakehouse/supplier_stats.total_price"),
        ("lakehouse/orders.supplier", "lakehouse/supplier_stats.total_price"),
    }
    assert kinds[("lakehouse/orders.price", "lakehouse/supplier_stats.total_price")] == "DIRECT/AGGREGATION"
    assert (
        kinds[("lakehouse/orders.bid_time", "lakehouse/supplier_stats.total_price")]
        == "INDIRECT/FILTER, INDIRECT/GROUP_BY"
    )
    assert kinds[("orders.price", "lakehouse/orders.price")] == "DIRECT/TRANSFORMATION, INDIRECT/FILTER"
    assert {hop.upstream for hop in answer.hops if hop.downstream == "lakehouse/orders.price"} == {
        f"orders.{field}" for field in ("order_id", "bid_time", "price", "item", "supplier")
    }
    assert answer.assets == ("lakehouse/orders", "orders")
    runs = {hop.downstream.split(".")[0]: hop.latest_run for hop in answer.hops}
    # The failed second run of supplier_stats is its latest, ended when it failed; the deployed
    # ingestion has not ended, so its time is when it started (not its last progress report).
    assert (runs["lakehouse/supplier_stats"].id, runs["lakehouse/supplier_stats"].state) == (
        run_id("run-stats-2"),
        "FAIL",
    )
    assert runs["lakehouse/supplier_stats"].time == at(104).isoformat()
    assert (runs["lakehouse/orders"].id, runs["lakehouse/orders"].state, runs["lakehouse/orders"].time) == (
        run_id("run-deployed"),
        "RUNNING",
        at(110).isoformat(),
    )


def test_the_trace_tree_puts_each_source_under_the_column_it_feeds(graph):
    lines = trace(graph, resolve("lakehouse/supplier_stats.total_price", SETTINGS), SETTINGS).tree().splitlines()
    assert lines[0] == "trace of lakehouse/supplier_stats.total_price"
    table = next(i for i, line in enumerate(lines) if "── lakehouse/orders.price  (DIRECT/AGGREGATION" in line)
    topic = next(
        i
        for i, line in enumerate(lines)
        if "── orders.price  (DIRECT/TRANSFORMATION, INDIRECT/FILTER: try_cast" in line
    )
    assert table < topic <= table + 5 and lines[topic].index("orders.price") > lines[table].index(
        "lakehouse/orders.price"
    )
    assert f"job {SUPPLIER_STATS.job.lineage_name}, latest run {run_id('run-stats-2')} FAIL" in lines[table]


def test_a_job_that_rewrites_its_own_column_is_walked_once():
    table = LAKEHOUSE_ORDERS.identity(SETTINGS)
    field = {
        "inputFields": [{"namespace": table.namespace, "name": table.name, "field": "price"}],
        "transformationType": "DIRECT/TRANSFORMATION",
        "transformationDescription": "ROUND(price, 1)",
    }
    dataset = {
        "namespace": table.namespace,
        "name": table.name,
        "facets": {"columnLineage": {"fields": {"price": field}}},
    }
    upsert = {
        "eventType": "COMPLETE",
        "eventTime": at(300).isoformat(),
        "run": {"runId": run_id("fix")},
        "job": {"namespace": NS, "name": "fix-prices"},
        "inputs": [dataset],
        "outputs": [dataset],
    }
    answer = impact(LineageGraph.from_events([*pipeline_events(), upsert]), resolve("orders.price", SETTINGS), SETTINGS)
    assert ("lakehouse/orders.price", "lakehouse/orders.price", "ROUND(price, 1)") in hops_of(answer)
    assert ("orders.price", "lakehouse/orders.price") in kinds_of(answer)  # the ingestion's lineage stays
    assert (
        sum("lakehouse/orders.price  (DIRECT/TRANSFORMATION: ROUND" in line for line in answer.tree().splitlines()) == 1
    )


@pytest.mark.parametrize(
    "text, key, column",
    [
        ("orders", "orders", None),
        ("lakehouse/orders.price", "lakehouse/orders", "price"),
        ("s3://warehouse:default/supplier_stats.total_price", "lakehouse/supplier_stats", "total_price"),
        (f"kafka://127.0.0.1:{SETTINGS.kafka_port}:supplier-stats", "supplier_stats_live", None),
    ],
)
def test_a_dataset_is_named_by_its_asset_key_or_its_namespace_and_name(text, key, column):
    subject = resolve(text, SETTINGS)
    assert (subject.dataset.key, subject.column) == (key, column)


def test_an_unknown_dataset_or_column_is_one_line_naming_what_exists(graph):
    with pytest.raises(QueryError) as unknown:
        resolve("lakehouse/order.price", SETTINGS)
    assert "'lakehouse/order.price'" in str(unknown.value) and "\n" not in str(unknown.value)
    assert all(
        f"{d.key} ({d.identity(SETTINGS).namespace}:{d.identity(SETTINGS).name})" in str(unknown.value)
        for d in DATASETS.values()
    )
    with pytest.raises(
        QueryError,
        match=r"^unknown column 'total' of supplier_stats_live: its columns are "
        r"window_start, window_end, supplier, total_price, count$",
    ):
        resolve("supplier_stats_live.total", SETTINGS)
    with pytest.raises(QueryError, match=r"trace needs a column, orders\.COLUMN: its columns are order_id, bid_time"):
        trace(graph, resolve("orders", SETTINGS), SETTINGS)


def test_the_live_stats_total_is_traced_to_the_topic_without_the_lakehouse(graph):
    answer = trace(graph, resolve("supplier_stats_live.total_price", SETTINGS), SETTINGS)
    assert {hop.upstream for hop in answer.hops} == {
        f"orders.{field}" for field in ("order_id", "bid_time", "price", "item", "supplier")
    }
    assert kinds_of(answer)[("orders.bid_time", "supplier_stats_live.total_price")] == (
        "INDIRECT/CONDITIONAL, INDIRECT/FILTER, INDIRECT/GROUP_BY"
    )
    assert [d.asset_key for d in answer.datasets] == [ORDERS.key]
    assert answer.jobs == (f"{NS}/{SUPPLIER_STATS_LIVE.job.lineage_name}",)


@pytest.mark.parametrize("refused", [["orders"], ["--partition", "2026-11-20"], ["--rematerialize"]])
def test_a_lineage_verb_refuses_a_subject_or_an_option_not_its_own_by_name(tmp_path, monkeypatch, capsys, refused):
    from lineage_assets.cli import main

    monkeypatch.setenv("LINEAGE_ASSETS_STATE_DIR", str(tmp_path))
    with pytest.raises(SystemExit) as exited:
        main(["lineage", "check", *refused])
    assert exited.value.code == 2
    assert f"error: unrecognized arguments: {' '.join(refused)}" in capsys.readouterr().err
    assert not (tmp_path / "lineage").exists()  # refused before anything was read or created


def test_each_lineage_verb_s_help_offers_its_own_options_only(capsys):
    from lineage_assets.cli import main

    with pytest.raises(SystemExit):
        main(["lineage", "check", "--help"])
    shown = capsys.readouterr().out
    assert "--design" in shown and "--source" in shown
    assert not any(option in shown for option in ("--partition", "--out", "--rematerialize", "--force", "--retry"))


@pytest.mark.parametrize(
    "command",
    [
        ["lineage", "check", "--source", "marquez"],
        ["lineage", "impact", "orders", "--source", "marquez"],
        ["lineage", "retire"],
    ],
)
def test_a_marquez_that_does_not_answer_is_one_line_naming_its_url_and_exit_code_2(
    tmp_path, monkeypatch, capsys, command
):
    from lineage_assets.cli import main

    monkeypatch.setenv("LINEAGE_ASSETS_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("LINEAGE_ASSETS_MARQUEZ_PORT", "1")  # nothing listens there
    assert main(command) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("lineage-assets: Marquez is not reachable at http://127.0.0.1:1/api/v1/")

"""The lineage check over events built from the catalog (pure logic, no servers): the asset graph
and its checks pass, and each way a check's run can stray from it is a gap that names it."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json

from openlineage.client.event_v2 import RunState

from lineage_assets.datasets import ARCHIVE, CHECKS, DATASETS, ORCHESTRATOR_JOB, ORDERS, SUPPLIER_STATS
from lineage_assets.lineage import events
from lineage_assets.lineage.check import check, runs_in_progress
from lineage_assets.lineage.graph import LineageGraph
from lineage_assets.lineage.observed import Observation, as_designed, observe_run
from lineage_assets.lineage.run_facts import Assertion, DagsterRun, RunFacts
from lineage_assets.lineage.transport import event_line
from lineage_assets.settings import Settings
from tests.openlineage_schemas import validate_event

SETTINGS = Settings()
RUN = DagsterRun(
    run_id="0b7f6c9e-1111-4222-8333-944455556666",
    job_name="__ephemeral_asset_job__",
    started_at=dt.datetime(2026, 11, 23, 9, 0, tzinfo=dt.UTC),
)
VALUES = CHECKS["orders_values_in_range"]


def as_json(event) -> dict:
    return json.loads(event_line(event))


def pipeline(*, with_checks: bool = True) -> list[dict]:
    """One Dagster run materializing every asset (each job observing the lineage the catalog expects),
    then (``with_checks``) evaluating every check."""
    log = [as_json(events.dagster_run_event(RunState.START, RUN, SETTINGS))]
    for dataset in DATASETS.values():
        log += [
            as_json(events.asset_event(RunState.START, dataset, RUN, SETTINGS)),
            as_json(
                events.asset_event(
                    RunState.COMPLETE, dataset, RUN, SETTINGS, RunFacts(observation=as_designed(dataset))
                )
            ),
        ]
    for asset_check in CHECKS.values() if with_checks else ():
        log += [
            as_json(events.check_event(RunState.START, asset_check, RUN, SETTINGS)),
            as_json(
                events.check_event(
                    RunState.COMPLETE,
                    asset_check,
                    RUN,
                    SETTINGS,
                    assertions=(Assertion(asset_check.name, "row_count", True, "rows equal offsets"),),
                )
            ),
        ]
    return [*log, as_json(events.dagster_run_event(RunState.COMPLETE, RUN, SETTINGS))]


def test_the_asset_graph_with_or_without_check_runs_passes():
    assert check(pipeline(), SETTINGS) == []
    assert check(pipeline(with_checks=False), SETTINGS) == []  # a check that never ran is no gap


def test_a_check_run_that_reads_another_dataset_or_writes_one_is_named():
    log = pipeline()
    complete = next(e for e in log if e["job"]["name"] == VALUES.lineage_name and e["eventType"] == "COMPLETE")
    archive, stats = ARCHIVE.identity(SETTINGS), SUPPLIER_STATS.identity(SETTINGS)
    complete["inputs"] = [{"namespace": archive.namespace, "name": archive.name}]
    complete["outputs"] = [{"namespace": stats.namespace, "name": stats.name}]
    job = f"{SETTINGS.lineage_namespace}/{VALUES.lineage_name}"
    assert sorted(check(log, SETTINGS)) == sorted(
        [
            f"extra edge: check job {job} reads {archive.namespace}:{archive.name}, which is not "
            f"asset lakehouse/orders it checks",
            f"extra edge: check job {job} writes s3://warehouse:default/supplier_stats; a check writes nothing",
        ]
    )


def test_a_check_run_left_without_its_end_is_a_run_left_running():
    log = [e for e in pipeline() if not (e["job"]["name"] == VALUES.lineage_name and e["eventType"] == "COMPLETE")]
    (gap,) = check(log, SETTINGS)
    job = f"{SETTINGS.lineage_namespace}/{VALUES.lineage_name}"
    assert gap == f"run left RUNNING: {job} run {RUN.check_run_id(VALUES)} has no terminal event"


def test_a_run_without_its_end_is_in_progress_while_its_dagster_run_is_and_left_running_otherwise():
    # The Dagster run and its orders run have started and not ended; the other runs have.
    unended = {RUN.lineage_run_id, RUN.asset_run_id(ORDERS)}
    log = [e for e in pipeline() if not (e["run"]["runId"] in unended and e["eventType"] == "COMPLETE")]
    orchestrator, orders = (
        f"{SETTINGS.lineage_namespace}/{name}" for name in (ORCHESTRATOR_JOB, ORDERS.job.lineage_name)
    )
    assert sorted(check(log, SETTINGS)) == [
        f"run left RUNNING: {job} run {run_id} has no terminal event"
        for job, run_id in sorted([(orchestrator, RUN.lineage_run_id), (orders, RUN.asset_run_id(ORDERS))])
    ]
    # Every lineage run of the Dagster run is in progress, the ended ones too: only the unended are notes.
    in_progress = {event["run"]["runId"]: RUN.started_at for event in log}
    assert check(log, SETTINGS, in_progress=in_progress) == []
    now = RUN.started_at + dt.timedelta(hours=3, minutes=12, seconds=5)
    assert runs_in_progress(LineageGraph.from_events(log), in_progress, now) == [
        f"run in progress: {orchestrator} run {RUN.lineage_run_id}, started 3h 12m ago",
        f"run in progress: {orders} run {RUN.asset_run_id(ORDERS)}, started 3h 12m ago",
    ]
    # Another Dagster run in progress is no evidence for this one's runs.
    assert len(check(log, SETTINGS, in_progress={"0190f2a4-another-dagster-run": RUN.started_at})) == 2


def test_the_age_of_a_run_in_progress_reads_in_its_two_largest_units():
    (started,) = [e for e in pipeline() if e["run"]["runId"] == RUN.lineage_run_id and e["eventType"] == "START"]
    graph = LineageGraph.from_events([started])
    ages = {
        dt.timedelta(seconds=45): "45s",
        dt.timedelta(minutes=2): "2m 0s",
        dt.timedelta(days=1, minutes=5): "1d 0h",
        dt.timedelta(seconds=-3): "0s",  # a clock behind the instance's
    }
    for elapsed, age in ages.items():
        (note,) = runs_in_progress(graph, {RUN.lineage_run_id: RUN.started_at}, RUN.started_at + elapsed)
        assert note.endswith(f", started {age} ago")


def renamed(event: dict, old: str) -> dict:
    return {**event, "job": {**event["job"], "name": old}}


def test_a_renamed_jobs_earlier_runs_are_history_but_an_unknown_job_is_a_gap():
    # Runs of the supplier_stats job from before its rename (and of its Spark application), then the current pipeline.
    stats = [e for e in pipeline() if e["job"]["name"] == SUPPLIER_STATS.job.lineage_name]
    before = [renamed(e, f"dagster.{SUPPLIER_STATS.job.former_names[0]}") for e in stats]
    assert check([*before, *pipeline()], SETTINGS) == []
    unknown = [renamed(e, "dagster.supplier-totals") for e in stats]
    assert check([*unknown, *pipeline()], SETTINGS) == [
        f"extra job: {SETTINGS.lineage_namespace}/dagster.supplier-totals reads or writes 2 datasets "
        f"but is no asset's job"
    ]


def stats_report(**changes) -> dict:
    """A `supplier_stats` run's ``column_lineage`` report as its job writes it (spark/lineage.report):
    SUM(price) per supplier, here joined with a table of discounts the catalog does not know."""
    orders, discounts = "table:lakehouse.default.orders", "table:lakehouse.default.discounts"
    report = {
        "columns": {
            "supplier": [{"source": orders, "field": "supplier", "type": "DIRECT", "subtype": "IDENTITY"}],
            "total_price": [
                {"source": orders, "field": "price", "type": "DIRECT", "subtype": "AGGREGATION"},
                {"source": discounts, "field": "discount", "type": "DIRECT", "subtype": "AGGREGATION"},
            ],
        },
        "derivations": {
            "supplier": f"«{orders}|supplier»",
            "total_price": f"sum((«{orders}|price» * (1 - «{discounts}|discount»)))",
        },
        "dataset": [
            {
                "source": discounts,
                "field": "supplier",
                "type": "INDIRECT",
                "subtype": "JOIN",
                "derivation": f"LeftOuter join on («{orders}|supplier» = «{discounts}|supplier»)",
            }
        ],
        "unresolved": [],
        "schema": [["supplier", "string"], ["total_price", "decimal(10,2)"]],
        "locations": {discounts: "s3://warehouse/default/discounts"},
    }
    return {**report, **changes}


def stats_run(run_id: str, report: dict | Observation | None) -> list[dict]:
    """A `supplier_stats` run that observed ``report`` (None: exactly the designed lineage)."""
    dagster_run = DagsterRun(run_id=run_id, job_name="supplier_stats_job", started_at=RUN.started_at)
    if isinstance(report, Observation):
        observation = report
    else:
        observation = as_designed(SUPPLIER_STATS) if report is None else observe_run(report, SETTINGS)
    facts = RunFacts(observation=observation)
    return [
        as_json(events.asset_event(RunState.START, SUPPLIER_STATS, dagster_run, SETTINGS)),
        as_json(events.asset_event(RunState.COMPLETE, SUPPLIER_STATS, dagster_run, SETTINGS, facts)),
    ]


def test_an_input_the_catalog_does_not_know_is_in_the_event_and_named_by_the_check():
    (_, complete) = stats_run("1c1e0a6e-1111-4222-8333-944455556666", stats_report())
    assert validate_event(complete) == []
    discounts = ("s3://warehouse", "default/discounts")
    assert discounts in {(d["namespace"], d["name"]) for d in complete["inputs"]}
    output = complete["outputs"][0]
    assert [(f["name"], f["type"]) for f in output["facets"]["schema"]["fields"]] == [
        ("supplier", "string"),
        ("total_price", "decimal(10,2)"),
    ]  # the schema the run wrote, not the catalog's five columns
    total = output["facets"]["columnLineage"]["fields"]["total_price"]
    assert {(f["name"], f["field"]) for f in total["inputFields"]} >= {("default/discounts", "discount")}
    assert total["transformationDescription"].startswith(
        "sum((lakehouse/orders.price * (1 - table:lakehouse.default.discounts.discount)))"
    )
    gaps = check([*pipeline(), *stats_run("1c1e0a6e-1111-4222-8333-944455556666", stats_report())], SETTINGS)
    stats = f"{SETTINGS.lineage_namespace}/{SUPPLIER_STATS.job.lineage_name}"
    extra = f"extra edge: job {stats} reads s3://warehouse:default/discounts, which asset {SUPPLIER_STATS.key}"
    assert f"{extra} does not depend on" in gaps
    assert any(
        gap.startswith(
            "column lineage of lakehouse/supplier_stats.total_price from s3://warehouse:default/discounts.discount"
        )
        for gap in gaps
    ), gaps


def test_a_write_whose_lineage_was_not_observed_is_a_gap_never_an_earlier_runs_lineage():
    observed = stats_run("2c1e0a6e-1111-4222-8333-944455556666", None)
    unreadable = stats_run("3c1e0a6e-1111-4222-8333-944455556666", stats_report(unresolved=["Expand"]))
    assert "columnLineageUnobserved" in unreadable[1]["outputs"][0]["facets"]
    assert validate_event(unreadable[1]) == []
    gaps = check([*pipeline(), *observed, *unreadable], SETTINGS)
    column_gaps = [gap for gap in gaps if "column lineage" in gap]
    run = unreadable[1]["run"]["runId"]
    assert column_gaps == [
        f"no observed column lineage: run {run} of {SETTINGS.lineage_namespace}/{SUPPLIER_STATS.job.lineage_name} "
        f"wrote {SUPPLIER_STATS.key} without it: the plan cannot be read: Expand"
    ]
    # A run as designed after it: clean again.
    again = stats_run("4c1e0a6e-1111-4222-8333-944455556666", None)
    assert check([*pipeline(), *observed, *unreadable, *again], SETTINGS) == []


def test_the_graph_as_it_stands_is_the_latest_runs_so_the_real_job_again_restores_a_clean_check():
    designed = pipeline()  # events in the order of their times, as a log holds them
    with_discounts = stats_run("5c1e0a6e-1111-4222-8333-944455556666", stats_report())
    assert any(gap.startswith("extra edge:") for gap in check([*designed, *with_discounts], SETTINGS))
    as_designed_again = stats_run("6c1e0a6e-1111-4222-8333-944455556666", None)
    assert check([*designed, *with_discounts, *as_designed_again], SETTINGS) == []


def test_a_column_that_reads_no_field_is_held_to_its_derivation_too():
    designed = SUPPLIER_STATS.designed
    assert designed is not None and designed.inputs["total_count"] == ()  # COUNT(*)
    counted = dataclasses.replace(designed, columns={**designed.columns, "total_count": "cast(count(0) as bigint)"})
    gaps = check(
        [*pipeline(), *stats_run("7c1e0a6e-1111-4222-8333-944455556666", Observation(counted, counted.lineage()))],
        SETTINGS,
    )
    assert [gap.split(" (run ")[0] for gap in gaps] == [
        "column lineage of lakehouse/supplier_stats.total_count: the catalog says cast(count(1) as bigint), "
        "Spark ran cast(count(0) as bigint)"
    ]

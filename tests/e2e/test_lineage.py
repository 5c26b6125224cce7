"""The lineage the end-to-end run emitted, read as data from the project's event log."""

from __future__ import annotations

from decimal import Decimal

import dagster as dg
import pytest

from lineage_assets.datasets import (
    ARCHIVE,
    CHECKS,
    DATASETS,
    LAKEHOUSE_ORDERS,
    LINEAGE_CHECK,
    ORCHESTRATOR_JOB,
    ORDERS,
    SUPPLIER_REVENUE,
    SUPPLIER_STATS,
)
from lineage_assets.definitions import build_definitions
from lineage_assets.lineage.check import check, check_log, log_design, log_notes
from lineage_assets.lineage.emitter import emitter_for
from lineage_assets.lineage.facets import PRODUCER
from lineage_assets.lineage.marquez import MarquezApi
from lineage_assets.resources.settings import SettingsResource
from tests.e2e.test_pipeline import GENERATED, VALID, expected_hourly_stats
from tests.openlineage_schemas import validate_event
from tests.suite import SHARED_PIPELINE

pytestmark = pytest.mark.xdist_group(SHARED_PIPELINE)  # the test stack's own topics, tables and lineage


@pytest.fixture(scope="module")
def events(runs, settings):
    return emitter_for(settings).events()


def runs_of(events, job_name):
    """The project's own runs of a job (not the Spark agent's)."""
    by_run = {}
    for event in events:
        if event["job"]["name"] == job_name and event["producer"] == PRODUCER:
            by_run.setdefault(event["run"]["runId"], []).append(event)
    return by_run


def test_every_emitted_event_validates_against_the_official_schemas(events):
    assert len(events) > 20
    problems = {f"{e['job']['name']} {e['eventType']}": validate_event(e) for e in events}
    assert {k: v for k, v in problems.items() if v} == {}


def test_each_materialization_is_one_run_from_start_to_one_terminal_event(events):
    for dataset in DATASETS.values():
        runs = runs_of(events, dataset.job.lineage_name)
        assert runs, dataset.key
        for run_events in runs.values():
            kinds = [e["eventType"] for e in run_events]
            assert kinds == ["START", "COMPLETE"], (dataset.key, kinds)
            assert run_events[0]["eventTime"] <= run_events[1]["eventTime"]


def test_asset_runs_nest_under_their_dagster_run(events):
    dagster_runs = {e["run"]["runId"]: e for e in events if e["job"]["name"] == ORCHESTRATOR_JOB}
    for run_events in runs_of(events, SUPPLIER_STATS.job.lineage_name).values():
        parent = run_events[0]["run"]["facets"]["parent"]
        assert parent["job"]["name"] == ORCHESTRATOR_JOB
        assert parent["root"]["run"]["runId"] == parent["run"]["runId"]
        tags = {t["key"]: t["value"] for t in dagster_runs[parent["run"]["runId"]]["run"]["facets"]["tags"]["tags"]}
        assert tags["dagster.job"] == "__ephemeral_asset_job__"


def test_spark_agent_lineage_is_one_application_run_nested_under_the_asset_run(events):
    batch = (SUPPLIER_STATS, SUPPLIER_REVENUE)  # the batch jobs, which openlineage-spark follows
    asset_runs = {run: dataset for dataset in batch for run in runs_of(events, dataset.job.lineage_name)}
    agent = [e for e in events if e.get("producer", "").startswith("https://github.com/OpenLineage/OpenLineage")]
    assert agent, "the openlineage-spark agent sent nothing"
    by_run = {}
    for event in agent:
        by_run.setdefault(event["run"]["runId"], []).append(event)
    # One application run per materialization, each under its asset run, with the Dagster run as root.
    assert len(by_run) == len(asset_runs)
    for run_events in by_run.values():
        assert [e["eventType"] for e in run_events] == ["START", "COMPLETE"]
        parent = run_events[0]["run"]["facets"]["parent"]
        dataset = asset_runs[parent["run"]["runId"]]
        assert parent["job"]["name"] == dataset.job.lineage_name
        assert parent["root"]["job"]["name"] == ORCHESTRATOR_JOB
        assert {e["job"]["name"] for e in run_events} == {dataset.job.spark_application}
        # The agent's actions are no jobs of their own: the asset's run carries the datasets.
        assert not [d for e in run_events for d in (*e.get("inputs", []), *e.get("outputs", []))]


def completes(events, dataset):
    """The COMPLETE events of the dataset's asset runs, in order."""
    return [
        e
        for run_events in runs_of(events, dataset.job.lineage_name).values()
        for e in run_events
        if e["eventType"] == "COMPLETE"
    ]


def test_outputs_carry_quality_metrics_equal_to_the_generated_orders(events):
    def metrics(dataset):
        return [e["outputs"][0]["facets"]["dataQualityMetrics"] for e in completes(events, dataset)]

    prices = [float(Decimal(o.order["price"])) for o in VALID]
    # lakehouse/orders, the whole table after each run (the second adds nothing): every valid order.
    orders = metrics(LAKEHOUSE_ORDERS)
    assert len(orders) == 2
    for table in orders:
        assert table["rowCount"] == len(VALID) and table["fileCount"] > 0 and table["bytes"] > 0
        assert table["columnMetrics"]["price"] == {"nullCount": 0, "min": min(prices), "max": max(prices)}
        assert {name: column["nullCount"] for name, column in table["columnMetrics"].items()} == {
            "order_id": 0,
            "item": 0,
            "price": 0,
            "supplier": 0,
            "bid_time": 0,
        }
    # supplier_stats, the whole table after each day's run (days in order): its (supplier, day, hour) cells so far.
    cells = expected_hourly_stats()
    days = sorted({day for _, day, _ in cells})
    stats = metrics(SUPPLIER_STATS)
    assert [table["rowCount"] for table in stats] == [sum(1 for _, d, _ in cells if d <= day) for day in days]
    totals = [float(total) for total, _ in cells.values()]
    assert stats[-1]["columnMetrics"]["total_price"] == {"nullCount": 0, "min": min(totals), "max": max(totals)}
    assert stats[-1]["columnMetrics"]["total_count"]["max"] == max(count for _, count in cells.values())
    # The archive, the records each run wrote: every generated record, then none.
    archive = metrics(ARCHIVE)
    assert [run["rowCount"] for run in archive] == [len(GENERATED), 0]
    assert archive[0]["fileCount"] > 0 and archive[0]["bytes"] > 0
    assert archive[0]["columnMetrics"]["dead_letter_reason"]["nullCount"] == len(VALID)  # only invalid records have one
    assert archive[0]["columnMetrics"]["key"]["nullCount"] == 0
    assert archive[1]["columnMetrics"]["key"] == {"nullCount": 0}
    for event in [e for dataset in (LAKEHOUSE_ORDERS, SUPPLIER_STATS, ARCHIVE) for e in completes(events, dataset)]:
        assert validate_event(event) == [], event["job"]["name"]


def test_lineage_check_passes_on_the_run(events, settings):
    assert check(events, settings) == []


def test_the_runs_keep_to_the_design_published_before_them(runs, settings):
    log = emitter_for(settings).log
    design = log_design(log)
    assert len(design.jobs) == len(DATASETS) + len(CHECKS) and len(design.schemas) == len(DATASETS)
    assert check_log(log, settings) == []  # the asset graph and the design: every run kept to both
    assert log_notes(log) == []  # every designed job ran
    for event in emitter_for(settings).design():
        assert validate_event(event) == [], event.get("job") or event["dataset"]


def test_lineage_check_reports_a_misnamed_dataset(events, settings):
    orders = ORDERS.identity(settings)
    misnamed = []
    for event in events:
        if event["job"]["name"] == LAKEHOUSE_ORDERS.job.lineage_name:
            event = {
                **event,
                "inputs": [
                    {**d, "namespace": "kafka://localhost:19092"} if d["name"] == orders.name else d
                    for d in event.get("inputs", [])
                ],
            }
        misnamed.append(event)
    gaps = check(misnamed, settings)
    assert (
        f"missing edge: dataset {orders.namespace}:orders (asset orders) -> job "
        f"{settings.lineage_namespace}/dagster.iceberg-ingestion" in gaps
    )
    assert (
        f"extra edge: job {settings.lineage_namespace}/dagster.iceberg-ingestion reads kafka://localhost:19092:orders, "
        f"which asset lakehouse/orders does not depend on" in gaps
    )
    assert any(g.startswith("orphan dataset: kafka://localhost:19092:orders") for g in gaps)


def test_a_failing_materialization_emits_fail_with_the_error(stack, settings, instance):
    # Settings and services are fine (a bad one stops the run before its lineage starts): the work fails.
    definitions = build_definitions(SettingsResource.of(settings))
    result = dg.materialize(
        [*definitions.assets],
        selection=[dg.AssetKey("orders")],
        resources=definitions.resources,
        instance=instance,
        raise_on_error=False,
        run_config={"ops": {"orders": {"config": {"count": -1}}}},
    )
    assert not result.success
    failed = [
        e
        for e in emitter_for(settings).events()
        if e["job"]["name"] == ORDERS.job.lineage_name and e["eventType"] == "FAIL"
    ]
    assert failed
    error = failed[-1]["run"]["facets"]["errorMessage"]
    assert "count=-1: the number of orders cannot be negative" in error["message"]
    kinds = [e["eventType"] for e in emitter_for(settings).events() if e["run"]["runId"] == failed[-1]["run"]["runId"]]
    assert kinds == ["START", "FAIL"]
    # And Marquez shows the run failed, with the error.
    assert emitter_for(settings).flush(timeout=90)
    stored = MarquezApi.of(settings).run(failed[-1]["run"]["runId"])
    assert stored["state"] == "FAILED"
    assert stored["facets"]["errorMessage"]["message"] == error["message"]


def test_every_asset_check_result_is_a_quality_assertion_on_the_dataset_it_checked(runs, events, settings):
    """Each evaluation of a check is a run of the check's job, nested under the Dagster run, reading
    the dataset it checked, with one assertion per thing it tested; the check the ingestion makes
    itself (the schema check) is on what that run read."""
    evaluated = [run.checks for run in runs]
    for asset_check in CHECKS.values():
        check_runs = runs_of(events, asset_check.lineage_name)
        assert len(check_runs) == len(runs), asset_check.name
        checked = DATASETS[asset_check.dataset].identity(settings)
        for run_events, outcomes in zip(check_runs.values(), evaluated):
            assert [e["eventType"] for e in run_events] == ["START", "COMPLETE"]
            assert run_events[0]["run"]["facets"]["parent"]["job"]["name"] == ORCHESTRATOR_JOB
            (read,) = run_events[1]["inputs"]
            assert (read["namespace"], read["name"]) == (checked.namespace, checked.name)
            assertions = read["inputFacets"]["dataQualityAssertions"]["assertions"]
            assert {a["name"] for a in assertions} == {asset_check.name}
            assert all(a["success"] for a in assertions) == outcomes[asset_check.name]
            assert {a.get("column") for a in assertions} == (set(asset_check.columns) or {None})
            assert validate_event(run_events[1]) == []
    for complete, outcomes in zip(completes(events, LAKEHOUSE_ORDERS), evaluated):
        (orders,) = complete["inputs"]
        (schema,) = orders["inputFacets"]["dataQualityAssertions"]["assertions"]
        assert (schema["name"], schema["success"]) == ("orders_schema_readable", outcomes["orders_schema_readable"])
    lineage_checks = {f"{LINEAGE_CHECK} of {dataset.key}" for dataset in DATASETS.values() if dataset.upstream}
    declared = {name for d in DATASETS.values() if d.computed_by for name in d.computed_by.check_names}
    in_run = {"orders_schema_readable", *declared}  # evaluated by the asset's run
    assert {name for outcomes in evaluated for name in outcomes} == {*CHECKS, *in_run, *lineage_checks}
    assert all(outcomes.get(name, True) for outcomes in evaluated for name in lineage_checks)  # as designed

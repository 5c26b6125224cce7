"""The Dagster UI as a person uses it: `dagster dev` against the test stack, driven in headless Chromium.

The user opens the asset graph, looks at an asset's columns and owners, clicks *Materialize all*,
picks today's partition for the daily asset, launches the run, and sees it succeed and every asset
materialized; the asset sensor follows up, and every run's lineage ends.
Screenshots go to artifacts/screenshots/.
"""

from __future__ import annotations

import datetime as dt
import time
import urllib.parse
import urllib.request
from pathlib import Path

import dagster as dg
import pytest
from dagster_graphql import DagsterGraphQLClient
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from lineage_assets.assets.run_lineage import dagster_run_of
from lineage_assets.datasets import DATASETS, SUPPLIER_STATS
from lineage_assets.lineage.check import check, check_marquez
from lineage_assets.lineage.emitter import emitter_for
from lineage_assets.lineage.marquez import MarquezApi
from lineage_assets.lineage.spark_agent import SparkApplication
from lineage_assets.processes import command_line, descendants
from lineage_assets.testing import module_pipeline
from tests.conftest import wait_for
from tests.ui.dagster_dev import RUN_TIMEOUT_S
from tests.ui.dagster_dev import dagster_dev as running_dagster_dev

settings = module_pipeline("dagster-ui")  # its runs beside the shared pipeline's, on another worker


def spark_job_of(events_file: Path) -> set[int]:
    """A run's Spark job: the driver whose arguments name its application's events file, and its children."""
    drivers = {
        int(entry.name)
        for entry in Path("/proc").iterdir()
        if entry.name.isdigit()
        and any(argument.endswith(f"={events_file}") for argument in command_line(int(entry.name)) or ())
    }
    return descendants(drivers)


def _run_and_ancestors(event: dict) -> set[str]:
    parent = event["run"].get("facets", {}).get("parent", {})
    return {
        event["run"]["runId"],
        parent.get("run", {}).get("runId"),
        parent.get("root", {}).get("run", {}).get("runId"),
    }


@pytest.fixture(scope="module")
def dagster_dev(stack, settings, tmp_path_factory):
    """`dagster dev` (webserver and daemon) on the project's workspace, configured for the test stack."""
    home = tmp_path_factory.mktemp("dagster-home")
    with running_dagster_dev(settings, home) as url:
        yield url, home


@pytest.fixture
def page(browser_page, dagster_dev):
    # The first-visit "join the community" dialog opens a second after the page settles, over whatever
    # the test was about to click: Playwright skips it whenever it is in the way, as a person would.
    browser_page.add_locator_handler(browser_page.get_by_role("button", name="Skip"), lambda skip: skip.click())
    return browser_page


def open_ui(page, url: str) -> None:
    page.goto(url)
    page.wait_for_load_state("networkidle")


def test_catalog_lists_every_asset_and_shows_the_lakehouse_columns_owners_and_kinds(page, dagster_dev, screenshots):
    url, _ = dagster_dev
    open_ui(page, f"{url}/assets")
    for dataset in DATASETS.values():
        page.get_by_text(" / ".join(dataset.asset_key_path), exact=True).first.wait_for()
    page.screenshot(path=screenshots / "catalog.png", full_page=True)

    open_ui(page, f"{url}/assets/lakehouse/supplier_stats?view=overview")
    columns = page.get_by_role("table").filter(has_text="Column name").first
    for column in ("supplier", "bid_date", "bid_hour", "total_price", "total_count"):
        columns.get_by_text(column, exact=True).first.wait_for()
    for label in ("Owners", "data-platform", "Kinds", "Iceberg", "Spark", "lakehouse"):
        page.get_by_text(label, exact=True).first.wait_for()
    page.screenshot(path=screenshots / "supplier_stats.png", full_page=True)


def wait_for_runs(instance, wanted, timeout_s: float = RUN_TIMEOUT_S) -> list:
    """The runs ``wanted`` picks, once there is one and all have finished."""
    deadline = time.monotonic() + timeout_s
    while True:
        runs = [run for run in instance.get_runs() if wanted(run)]
        if runs and all(run.is_finished for run in runs):
            return runs
        assert time.monotonic() < deadline, f"no finished run after {timeout_s} s: {runs}"
        time.sleep(5)


def test_materialize_all_from_the_asset_graph(page, dagster_dev, settings, screenshots):
    url, home = dagster_dev
    open_ui(page, f"{url}/asset-groups")
    page.screenshot(path=screenshots / "asset-graph.png")
    page.get_by_role("button", name="Materialize all…").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_text(f"Launch runs to materialize {len(DATASETS)} assets").wait_for()
    # The orders asset generates its orders up to now, so the daily asset takes today.
    today = str(dt.datetime.now(dt.UTC).date())
    partitions = dialog.locator("input[type=text]").first
    # The dialog loads the partitions' status after it opens and may reset the box meanwhile: type
    # the day again until the selection holds (a person would do the same).
    for attempt in range(3):
        partitions.fill(today)
        partitions.press("Enter")
        try:
            dialog.get_by_text("1 partition", exact=True).wait_for(timeout=20_000)
            break
        except PlaywrightTimeoutError:
            page.screenshot(path=screenshots / f"launch-dialog-attempt-{attempt}.png")
            if attempt == 2:
                raise
    page.screenshot(path=screenshots / "launch-dialog.png")
    dialog.get_by_role("button", name="Launch 1 run").click()

    everything = {dg.AssetKey(dataset.asset_key_path) for dataset in DATASETS.values()}
    with dg.DagsterInstance.from_config(str(home)) as instance:
        (run,) = wait_for_runs(instance, lambda r: set(r.asset_selection or ()) == everything)
        assert run.status == dg.DagsterRunStatus.SUCCESS, f"run {run.run_id} ended {run.status}"
        assert run.tags.get("dagster/partition") == today
        # The run's own materializations: the sensor's follow-up run may already have materialized
        # supplier_stats again by now.
        materialized = instance.get_records_for_run(
            run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION
        ).records
        assert {record.event_log_entry.dagster_event.asset_key for record in materialized} == everything
        # The asset sensor (on by default) asks for today's supplier_stats after the new orders.
        (followup,) = wait_for_runs(
            instance, lambda r: r.tags.get("dagster/sensor_name") == "supplier_stats_on_new_orders"
        )
        assert followup.status == dg.DagsterRunStatus.SUCCESS and followup.tags.get("dagster/partition") == today
        dagster_runs = [dagster_run_of(instance, r.run_id) for r in (run, followup)]

    # Each Dagster run's own lineage run ends (its executor ends it, where the run is orchestrated).
    emitter = emitter_for(settings)
    deadline = time.monotonic() + 120
    while unfinished := [
        r.run_id
        for r in dagster_runs
        if not any(e["run"]["runId"] == r.lineage_run_id and e["eventType"] == "COMPLETE" for e in emitter.events())
    ]:
        assert time.monotonic() < deadline, f"no COMPLETE lineage event for Dagster runs {unfinished}"
        time.sleep(5)
    # Nothing these runs started (asset runs, Spark's runs) is left RUNNING either.
    ours = {r.lineage_run_id for r in dagster_runs}
    family = [e for e in emitter.events() if ours & _run_and_ancestors(e)]
    assert len(family) > 2 * len(DATASETS)
    assert not [gap for gap in check(family, settings) if gap.startswith("run left RUNNING")]
    # And so Marquez shows them: every run ended, each asset still one job whichever Dagster job
    # (the UI's asset job, the sensor's) ran it, and nothing beside the asset graph.
    assert emitter.flush(timeout=90)
    marquez = MarquezApi.of(settings)
    assert {marquez.run(run_id)["state"] for run_id in {e["run"]["runId"] for e in family}} == {"COMPLETED"}
    assert check_marquez(marquez, settings) == []

    open_ui(page, f"{url}/runs/{run.run_id}")
    page.get_by_text("Success", exact=True).first.wait_for()
    page.screenshot(path=screenshots / "run.png")
    open_ui(page, f"{url}/assets/orders?view=overview")
    page.get_by_text("Latest materialization").first.wait_for()
    page.get_by_text("rows_out", exact=True).first.wait_for()
    page.screenshot(path=screenshots / "orders-materialized.png", full_page=True)


def test_a_run_terminated_while_spark_works_ends_every_lineage_run_aborted_and_leaves_no_spark_job(
    dagster_dev, settings
):
    url, home = dagster_dev
    address = urllib.parse.urlparse(url)
    client = DagsterGraphQLClient(address.hostname, port_number=address.port)
    today = str(dt.datetime.now(dt.UTC).date())
    run_id = client.submit_job_execution("supplier_stats_job", tags={"dagster/partition": today})
    emitter = emitter_for(settings)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        dagster_run = wait_for(
            lambda: instance.get_run_by_id(run_id) and dagster_run_of(instance, run_id), 60, "run record"
        )
        # Terminate once the Spark application has reported itself (its OpenLineage START), as a user
        # would cancel a long batch job.
        spark_events = SparkApplication(
            settings, SUPPLIER_STATS, dagster_run.asset_run_id(SUPPLIER_STATS), dagster_run.lineage_run_id
        ).events_file
        wait_for(
            lambda: spark_events.is_file() and spark_events.stat().st_size > 0, RUN_TIMEOUT_S, "Spark application START"
        )
        spark_job = spark_job_of(spark_events)  # other tests' jobs of the same script may run meanwhile
        assert spark_job
        client.terminate_run(run_id)
        (run,) = wait_for_runs(instance, lambda r: r.run_id == run_id, timeout_s=120)
        assert run.status == dg.DagsterRunStatus.CANCELED

    wait_for(lambda: not any(command_line(pid) for pid in spark_job), 30, "end of the Spark job")

    def family() -> list[dict]:
        return [e for e in emitter.events() if dagster_run.lineage_run_id in _run_and_ancestors(e)]

    def terminal_states() -> dict[str, list[str]]:
        states: dict[str, list[str]] = {}
        for event in family():
            states.setdefault(event["run"]["runId"], []).append(event["eventType"])
        return states if all(kinds[-1] in ("ABORT", "FAIL", "COMPLETE") for kinds in states.values()) else {}

    # The Dagster run, the asset's run and Spark's application run each end once, aborted (the
    # application's too, though openlineage-spark reports a stopped driver's shutdown COMPLETE).
    states = wait_for(terminal_states, 120, "terminal event for each run of the family")
    assert len(states) == 3, states
    assert all(
        kinds[0] == "START" and len([k for k in kinds if k in ("ABORT", "FAIL", "COMPLETE")]) == 1
        for kinds in states.values()
    ), states
    assert {kinds[-1] for kinds in states.values()} == {"ABORT"}, states
    assert emitter.flush(timeout=90)
    marquez = MarquezApi.of(settings)
    assert {marquez.run(run)["state"] for run in states} == {"ABORTED"}

"""Dagster deployed as services of the stack (``LINEAGE_ASSETS_DAGSTER=services``): a code server, the
webserver on a workspace that points at it, and the daemon, on the project's instance in the stack's
PostgreSQL. The demo's pass launched through the webserver's GraphQL API waits in the run queue until
the daemon starts each run; its day of ``supplier_stats`` run again in process writes the same totals
with the same lineage. The daemon's sensor launches ``supplier_stats`` for a day new orders touched,
and its schedule the upkeep at each tick, once, also when the daemon was killed and started again by
`stack up`. `stack reload` starts the code server again on changed settings, never under a run; the
services restarted keep the run history."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import signal
import urllib.parse

import dagster as dg
import pytest
from dagster_graphql import DagsterGraphQLClient

from lineage_assets.assets.common import asset_key
from lineage_assets.assets.in_progress import UNDER_WAY
from lineage_assets.code_reload import reload_code
from lineage_assets.datasets import ARCHIVE, LAKEHOUSE_ORDERS, SUPPLIER_STATS
from lineage_assets.datasets import ORDERS as ORDERS_TOPIC
from lineage_assets.demo import DAILY, run_pipeline
from lineage_assets.demo_runs import InProcess, ThroughServices
from lineage_assets.generator import GeneratorConfig, generate_orders, produce_orders
from lineage_assets.instance import dagster_home, open_instance
from lineage_assets.lineage.emitter import emitter_for
from lineage_assets.lineage.graph import LineageGraph
from lineage_assets.processes import alive
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.stack.services.base import StackError
from lineage_assets.stack.services.dagster import DAGSTER_SERVICES, LOCATION
from lineage_assets.stack.supervisor import Supervisor
from lineage_assets.testing import pipeline_of_its_own
from tests.conftest import wait_for
from tests.integration.test_deployments import orders_topic_ready
from tests.ui.dagster_dev import DAY, ORDERS, RUN_TIMEOUT_S, comparable, events_of_runs

SERVICES = [service.name for service in DAGSTER_SERVICES]
SENSOR = "supplier_stats_on_new_orders"
SCHEDULE = "lakehouse_maintenance_schedule"
FINISHED = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)
PASS = {
    "count": ORDERS.count,
    "seed": ORDERS.seed,
    "start": ORDERS.start.isoformat(),
    "late_fraction": 0.0,
    "bad_fraction": 0.0,
}


def graphql(settings, query: str, **variables) -> dict:
    from gql import Client, GraphQLRequest
    from gql.transport.requests import RequestsHTTPTransport

    client = Client(transport=RequestsHTTPTransport(url=f"{settings.dagster_url}/graphql", timeout=30))
    return client.execute(GraphQLRequest(query, variable_values=variables))


SELECTOR = {"repositoryLocationName": LOCATION, "repositoryName": "__repository__", "scheduleName": SCHEDULE}


def schedule_of(settings) -> dict:
    """The upkeep schedule as the webserver shows it: its cron and its state's id."""
    query = (
        "query($s: ScheduleSelector!) { scheduleOrError(scheduleSelector: $s) "
        "{ ... on Schedule { cronSchedule scheduleState { id } } } }"
    )
    return graphql(settings, query, s=SELECTOR)["scheduleOrError"]


def switch_upkeep(settings, on: bool) -> None:
    """The upkeep schedule's switch in the UI, through the webserver's GraphQL API."""
    if on:
        query = "mutation($s: ScheduleSelector!) { startSchedule(scheduleSelector: $s) { __typename } }"
        answer = graphql(settings, query, s=SELECTOR)["startSchedule"]
    else:
        query = "mutation($id: String!) { stopRunningSchedule(id: $id) { __typename } }"
        answer = graphql(settings, query, id=schedule_of(settings)["scheduleState"]["id"])["stopRunningSchedule"]
    assert answer["__typename"] == "ScheduleStateResult", answer


@pytest.fixture(scope="module")
def deployed(stack, settings):
    """A pipeline of its own, and Dagster's services running for it."""
    own = dataclasses.replace(
        pipeline_of_its_own(settings, "dagster-services"), dagster="services", upkeep_schedule="* * * * *"
    )
    orders_topic_ready(own)  # each test produces orders of its own
    supervisor = Supervisor(own)
    assert all(status.healthy for status in supervisor.up(SERVICES))
    switch_upkeep(own, on=False)  # until the test of its ticks
    try:
        with open_instance(own, dagster_home(own)) as instance:
            yield own, supervisor, instance
    finally:
        supervisor.down(SERVICES)


def test_the_demos_pass_through_the_services_is_queued_and_a_run_writes_and_reports_what_it_does_in_process(deployed):
    own, _, instance = deployed
    services = ThroughServices(own, instance)
    launched = run_pipeline(SettingsResource.of(own), instance, PASS, runs=services)
    assert launched.checks and all(launched.checks.values()), launched.checks
    for run_id in launched.run_ids:
        # Through the run queue: enqueued by the webserver, launched out of it by the daemon.
        for step in (dg.DagsterEventType.RUN_ENQUEUED, dg.DagsterEventType.RUN_STARTING):
            assert instance.get_records_for_run(run_id, of_type=step).records, (run_id, step)
    # Every order through each streaming job, none a dead letter, the day's totals of all of them.
    assert list(launched.built_by) == [DAY] and launched.dead_letters == 0  # by the pass, or first by the sensor
    assert {launched.rows[d.key] for d in (ORDERS_TOPIC, ARCHIVE, LAKEHOUSE_ORDERS)} == {ORDERS.count}
    assert sum(count for _, count in launched.supplier_totals[DAY].values()) == ORDERS.count

    # The day's run again, in this process: the same rows, the same lineage.
    launched_day = launched.built_by[DAY]
    here = InProcess(SettingsResource.of(own), instance).run([asset_key(d) for d in DAILY], partition_key=DAY)
    here.raise_failures()
    assert here.metadata(SUPPLIER_STATS)["totals"] == services.ended(launched_day).metadata(SUPPLIER_STATS)["totals"]

    def lineage(run_id: str) -> dict:
        return comparable(LineageGraph.from_events(events_of_runs(emitter_for(own).events(), {run_id})), own)

    shown = lineage(launched_day)
    assert shown == lineage(here.run_id)
    assert shown["columns"] and shown["outputs"] and shown["inputs"]


def test_the_daemons_sensor_builds_the_day_new_orders_touched(deployed):
    own, _, instance = deployed
    day = dt.datetime(2026, 11, 26, 9, tzinfo=dt.UTC)
    produce_orders(list(generate_orders(GeneratorConfig(count=15, seed=2611, start=day, late_fraction=0))), own)
    ingestion = ThroughServices(own, instance).run([asset_key(LAKEHOUSE_ORDERS)])
    ingestion.raise_failures()
    days_runs = dg.RunsFilter(job_name="supplier_stats_job", tags={"dagster/partition": day.date().isoformat()})
    (built,) = wait_for(
        lambda: [run for run in instance.get_runs(days_runs) if run.is_finished],
        RUN_TIMEOUT_S,
        f"the sensor's run of supplier_stats for {day.date()}",
        poll=3,
    )
    assert built.status == dg.DagsterRunStatus.SUCCESS and built.tags["dagster/sensor_name"] == SENSOR


def test_two_launches_of_a_streaming_asset_at_once_run_one_after_the_other_and_write_each_order_once(deployed):
    own, supervisor, instance = deployed
    day = dt.datetime(2026, 11, 27, 9, tzinfo=dt.UTC)
    produce_orders(list(generate_orders(GeneratorConfig(count=12, seed=2711, start=day, late_fraction=0))), own)
    runs = ThroughServices(own, instance)
    first, second = (runs.launch([asset_key(LAKEHOUSE_ORDERS)]) for _ in range(2))
    # A reload of the code now would end the run under way with the code server: refused, naming it.
    wait_for(
        lambda: instance.get_run_by_id(first).status in UNDER_WAY, RUN_TIMEOUT_S, f"run {first} to start", poll=0.1
    )
    with pytest.raises(StackError, match=f"not while runs are under way.*{first} "):
        reload_code(supervisor)
    ended = [runs.ended(run_id) for run_id in (first, second)]
    for run in ended:
        run.raise_failures()

    def at(run_id: str, kind: dg.DagsterEventType) -> float:
        (record,) = instance.get_records_for_run(run_id, of_type=kind).records
        return record.event_log_entry.timestamp

    # Held in the queue by the job's pool until the first ended, not refused.
    assert at(second, dg.DagsterEventType.RUN_STARTING) >= at(first, dg.DagsterEventType.RUN_SUCCESS)
    written = [run.metadata(LAKEHOUSE_ORDERS)["rows_out"] for run in ended]
    assert written == [12, 0]


def test_the_schedule_ticks_a_killed_daemon_is_restarted_no_tick_runs_twice_and_the_run_history_is_kept(
    deployed,
):
    own, supervisor, instance = deployed
    before = {run.run_id: run.status for run in instance.get_runs()}
    assert dg.DagsterRunStatus.SUCCESS in before.values(), "the runs of the tests before"

    def upkeeps() -> list[dg.DagsterRun]:
        scheduled = dg.RunsFilter(job_name="lakehouse_maintenance", tags={"dagster/schedule_name": SCHEDULE})
        return [run for run in instance.get_runs(scheduled) if run.run_id not in before]

    switch_upkeep(own, on=True)  # ticks every minute in these settings
    # Killed while its first tick's upkeep runs: launched, the run goes on as the code server's child.
    # (Killed amid a launch, the daemon leaves the run STARTING until run monitoring fails it.)
    started = dg.DagsterRunStatus.STARTED
    wait_for(lambda: [run for run in upkeeps() if run.status == started], 180, "the first upkeep to run", poll=0.2)
    (daemon,) = supervisor.status(["dagster-daemon"])
    assert daemon.pid is not None
    os.kill(daemon.pid, signal.SIGKILL)
    wait_for(lambda: not alive(daemon.pid), 30, "the daemon to die", poll=0.2)
    # Its heartbeats are still fresh; it is the process that is gone.
    assert not supervisor.status(["dagster-daemon"])[0].healthy
    supervisor.up(["dagster-daemon"])
    (again,) = supervisor.status(["dagster-daemon"])
    assert again.healthy and again.pid not in (None, daemon.pid)

    # The restarted daemon ticks on, and each tick started one upkeep, each a success.
    ticked = wait_for(lambda: len(runs := upkeeps()) >= 2 and runs, 240, "the next tick after the restart", poll=1)
    switch_upkeep(own, on=False)
    ended = [ThroughServices(own, instance).ended(run.run_id) for run in ticked]
    for run in ended:
        run.raise_failures()
    times = [run.tags[".dagster/scheduled_execution_time"] for run in ticked]
    assert len(set(times)) == len(times), times

    # The settings changed and the code reloaded: the webserver shows the new schedule.
    (code,) = supervisor.status(["dagster-code"])
    reload_code(Supervisor(dataclasses.replace(own, upkeep_schedule="7 * * * *")))
    assert supervisor.status(["dagster-code"])[0].pid not in (None, code.pid)
    assert schedule_of(own)["cronSchedule"] == "7 * * * *"

    supervisor.down(SERVICES)
    assert not any(status.running for status in supervisor.status(SERVICES))
    assert all(status.healthy for status in supervisor.up(SERVICES))
    address = urllib.parse.urlparse(own.dagster_url)
    client = DagsterGraphQLClient(address.hostname, port_number=address.port)
    finished = {run_id: status for run_id, status in before.items() if status in FINISHED}
    assert {run_id: client.get_run_status(run_id) for run_id in finished} == finished

"""Lineage overhead, batch: the `supplier_stats` Spark job on the same data with lineage fully on
(the project's events, with the column lineage openlineage-spark observed, plus the agent's own
events nested under them) and fully off, run in the same stack, in rounds whose order alternates
(ABBA), after a round that is not counted (the stack's servers warm up). The cost of lineage is the
ratio on/off of each round's wall times, met when its whole 95 % interval is within the target; the
ratio of their CPU times (the bench process and the job's) is reported beside it. A third subject,
the agent loaded and the project's events off, splits that cost between openlineage-spark in the
driver and the project's own emission. The day's orders are written straight into the Iceberg table
(bench/synthetic_orders.py), as for the scaling benchmark."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

from openlineage.client.event_v2 import RunState

from bench.measure import alternate, cpu_seconds, interval_text, median, paired_ratio, rounded, wall_seconds
from bench.scaling import QUICK_SIZES, day_for, fill_days
from bench.supplier_stats_runs import bare_submit
from lineage_assets.assets.common import observed_lineage
from lineage_assets.datasets import SUPPLIER_STATS
from lineage_assets.lineage.emitter import emitter_for
from lineage_assets.lineage.run_facts import DagsterRun, OutputStatistics, RunFacts
from lineage_assets.resources.lineage import AssetRunLineage
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.resources.spark_jobs import SparkJobsResource

TARGET = 1.03
LOG = logging.getLogger(__name__)


def day_sizes(quick: bool) -> tuple[int, ...]:
    return (QUICK_SIZES[0],) if quick else (50_000,)  # quick: a day the other benchmarks use too


def run(environment: SettingsResource, quick: bool) -> dict:
    # A pair's ratio spreads by about 7 % (sd of its log), twice the 3 % target: the interval needs a score of pairs.
    (orders,), rounds = day_sizes(quick), 2 if quick else 24
    settings = environment.settings
    spark_jobs = SparkJobsResource(environment=environment)
    fill_days(spark_jobs, (orders,))
    day = day_for(orders)
    emitter = emitter_for(settings)
    observing: list[float] = []  # what reading its own plan cost the job, inside both sides' runs

    def asset_run(run_id: str) -> AssetRunLineage:
        dagster_run = DagsterRun(run_id=run_id, job_name="bench", started_at=dt.datetime.now(dt.UTC))
        return AssetRunLineage(emitter, SUPPLIER_STATS, dagster_run, settings)

    def with_lineage(round_number: int) -> None:
        run = asset_run(f"bench-{round_number}")
        run.emit(RunState.START)
        application = run.spark_application()
        report = bare_submit(spark_jobs, day, extra_conf=application.conf())
        if report.column_lineage is None:
            raise RuntimeError(f"supplier_stats for {day} reported no column lineage: it observed no plan")
        observing.append(report.column_lineage["seconds"])
        agent = run.forward_spark_events(application)
        run.complete(
            RunFacts(
                OutputStatistics(rows=report.rows_written),
                "OVERWRITE",
                observation=observed_lineage(SUPPLIER_STATS, report, settings, LOG, agent),
            )
        )
        run.emit(RunState.COMPLETE)

    def agent_only(round_number: int) -> None:
        application = asset_run(f"bench-agent-{round_number}").spark_application()
        bare_submit(spark_jobs, day, extra_conf=application.conf())
        application.events_file.unlink(missing_ok=True)  # read by no one: the project emits nothing

    cpu: dict[str, list[float]] = {"off": [], "agent": [], "on": []}

    def measured(side: str, action: Callable[[int], object]) -> Callable[[int], float]:
        def measure(round_number: int) -> float:
            started = cpu_seconds()
            seconds = wall_seconds(action)(round_number)
            cpu[side].append(cpu_seconds() - started)
            # The events reach Marquez before the next round, which their delivery would slow down.
            if not emitter.flush(timeout=60):
                raise RuntimeError(f"lineage events still wait for Marquez after round {round_number}")
            return seconds

        return measure

    subjects = {
        "off": measured("off", lambda _: bare_submit(spark_jobs, day)),
        "agent": measured("agent", agent_only),
        "on": measured("on", with_lineage),
    }
    if not quick:  # a round that is not counted, as the stack's servers warm up
        for measure in subjects.values():
            measure(-1)
        for series in (*cpu.values(), observing):
            series.clear()
    timings = alternate(rounds, subjects, balanced=True)
    off, on = median(timings["off"]), median(timings["on"])
    paired = paired_ratio(timings["on"], timings["off"])
    return {
        "name": "lineage_overhead_batch",
        "target": f"ratio <= {TARGET}, its whole 95 % interval",
        "met": paired["high"] is not None and paired["high"] <= TARGET,
        "paired": paired,
        "orders_in_day": orders,
        "rounds": rounds,
        "median_off_s": off,
        "median_on_s": on,
        "ratio": round(on / off, 4),
        "timings_s": rounded(timings),
        "cpu_paired": paired_ratio(cpu["on"], cpu["off"]),
        # The split: openlineage-spark in the driver, then the project's emission on top of it.
        "agent_paired": paired_ratio(timings["agent"], timings["off"]),
        "emission_paired": paired_ratio(timings["on"], timings["agent"]),
        "agent_cpu_paired": paired_ratio(cpu["agent"], cpu["off"]),
        "emission_cpu_paired": paired_ratio(cpu["on"], cpu["agent"]),
        "cpu_s": rounded(cpu),
        "plan_observation_median_s": median(observing),
    }


def summary(result: dict) -> str:
    return (
        f"on/off ratio {interval_text(result['paired'])}, medians {result['median_on_s']} s vs "
        f"{result['median_off_s']} s; CPU on/off {interval_text(result['cpu_paired'])}; split: the agent alone "
        f"{interval_text(result['agent_paired'])} of off (CPU {interval_text(result['agent_cpu_paired'])}), "
        f"the project's emission {interval_text(result['emission_paired'])} of the agent alone "
        f"(CPU {interval_text(result['emission_cpu_paired'])}); reading its own plan "
        f"{result.get('plan_observation_median_s')} s of each run"
    )

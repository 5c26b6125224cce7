"""Cold start: `dagster asset materialize` of `lakehouse/supplier_stats` for one day from a fresh
process (the CLI, on a Dagster instance of its own made beforehand, as a user's exists), against a bare
spark-submit of the same job, alternately; each run's time split into phases.

Where the split comes from (every clock is the machine's wall clock):
- launch and exit: this process, around the subprocess;
- Dagster's step start and end: the run's event log in the throw-away instance;
- the driver JVM's creation and its class-loading time: HotSpot's performance counters, saved at
  JVM exit (-XX:+PerfDataSaveToFile; `sun.rt.createVmBeginTime`, `sun.cls.time`) and read with jstat;
- the SparkContext's start, the Spark SQL executions and the application's end: Spark's event log.
Both settings reach the driver through SPARK_SUBMIT_OPTS (bench/spark_profile.py), so the job and the asset
run unchanged.

Phases: before Spark (up to the driver JVM's creation: Python imports, Dagster loading the
definitions and starting the run and step, the spark-submit launcher JVM), Spark start (driver JVM
up to the SparkContext's start: the Python driver and the py4j gateway), session and catalog
(SparkContext and session set-up up to the first SQL statement, which includes opening the Iceberg
REST catalog), work (first to last SQL execution), Spark stop, and after Spark (driver exit; for the
CLI also the asset recording its materialization and lineage and the run ending). For the CLI, the
launch to Dagster's step start and the step end to exit are given too. Jar load is the driver's
class-loading time (load, verify, link, static initializers; of Spark's, Iceberg's, Hadoop's and the
AWS SDK's jars and the JDK's own classes); it happens inside the Spark phases, so it is reported
beside them, not added to them.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import dagster as dg

from bench.measure import alternate, median, rounded
from bench.scaling import FULL_SIZES, QUICK_SIZES, day_for, fill_days
from bench.spark_profile import Instrumented
from bench.supplier_stats_runs import bare_submit
from lineage_assets.datasets import SUPPLIER_STATS
from lineage_assets.instance import dagster_environment, prepare_dagster_home
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.resources.spark_jobs import SparkJobsResource
from lineage_assets.settings import PROJECT_ROOT

TARGET_RATIO = 1.2  # `dagster asset materialize` / bare spark-submit, end to end
PHASES = ("before_spark_s", "spark_start_s", "session_and_catalog_s", "work_s", "spark_stop_s", "after_spark_s")


def phases(launched: float, spark: dict, exited: float) -> dict:
    """The run's timeline cut at its milestones (seconds); ``class_loading_s`` lies inside the Spark phases."""
    cuts = [
        launched,
        spark["jvm_created"],
        spark["context_started"],
        spark["first_sql"],
        spark["last_sql"],
        spark["stopped"],
        exited,
    ]
    split = {name: round(end - start, 3) for name, start, end in zip(PHASES, cuts, cuts[1:])}
    return {
        **split,
        "total_s": round(exited - launched, 3),
        "class_loading_s": round(spark["class_loading_s"], 3),
        "classes_loaded": spark["classes_loaded"],
    }


def dagster_step_times(home: Path) -> tuple[float, float]:
    """(start, end) of the materialization's step, from the run's event log."""
    instance = dg.DagsterInstance.from_config(str(home))
    (run,) = instance.get_runs()
    logs = {
        entry.dagster_event.event_type_value: entry.timestamp
        for entry in instance.all_logs(run.run_id)
        if entry.dagster_event
    }
    if "STEP_SUCCESS" not in logs:
        raise RuntimeError(f"the cold materialization did not succeed: {sorted(logs)}")
    return logs["STEP_START"], logs["STEP_SUCCESS"]


def day_sizes(quick: bool, orders: int | None = None) -> tuple[int, ...]:
    return (orders or (QUICK_SIZES[0] if quick else FULL_SIZES[0]),)


def run(environment: SettingsResource, quick: bool, orders: int | None = None) -> dict:
    (orders,) = day_sizes(quick, orders)
    rounds = 1 if quick else 3
    day = day_for(orders)
    spark_jobs = SparkJobsResource(environment=environment)
    fill_days(spark_jobs, (orders,))
    cli = [
        str(Path(sys.executable).with_name("dagster")),
        "asset",
        "materialize",
        "-m",
        "lineage_assets.definitions",
        "--select",
        SUPPLIER_STATS.key,
        "--partition",
        day,
    ]
    splits: dict[str, list[dict]] = {"spark_submit": [], "dagster_cli": []}

    with tempfile.TemporaryDirectory(prefix="bench-cold-") as scratch:
        instrumented = Instrumented(Path(scratch) / "spark-profile")

        def bare(_: int) -> float:
            instrumented.reset()
            launched = time.time()
            bare_submit(spark_jobs, day)
            exited = time.time()
            splits["spark_submit"].append(phases(launched, instrumented.spark_times(), exited))
            return exited - launched

        def cold_cli(round_number: int) -> float:
            instrumented.reset()
            home = prepare_dagster_home(environment.settings, Path(scratch) / f"dagster-{round_number}")
            # The instance's storage made before, as a user's instance has it: not a cost of materializing.
            dg.DagsterInstance.from_config(str(home)).dispose()
            variables = dagster_environment(environment.settings, home)
            launched = time.time()
            subprocess.run(cli, cwd=PROJECT_ROOT, env=variables, check=True, capture_output=True)
            exited = time.time()
            step_started, step_ended = dagster_step_times(home)
            splits["dagster_cli"].append(
                {
                    **phases(launched, instrumented.spark_times(), exited),
                    "to_step_start_s": round(step_started - launched, 3),
                    "after_step_s": round(exited - step_ended, 3),
                }
            )
            shutil.rmtree(home)
            return exited - launched

        with instrumented.active():
            timings = alternate(rounds, {"spark_submit": bare, "dagster_cli": cold_cli})

    medians = {name: {key: median([s[key] for s in runs]) for key in runs[0]} for name, runs in splits.items()}
    ratio = round(median(timings["dagster_cli"]) / median(timings["spark_submit"]), 4)
    return {
        "name": "cold_start",
        "target": f"`dagster asset materialize` <= {TARGET_RATIO}x bare spark-submit; phases reported",
        "met": ratio <= TARGET_RATIO,
        "orders_in_day": orders,
        "rounds": rounds,
        "ratio": ratio,
        "median_phases_s": medians,
        "timings_s": rounded(timings),
        "runs": splits,
    }


def summary(result: dict) -> str:
    cli, bare = result["median_phases_s"]["dagster_cli"], result["median_phases_s"]["spark_submit"]
    split = ", ".join(f"{name.removesuffix('_s').replace('_', ' ')} {cli[name]} s" for name in PHASES)
    return (
        f"`dagster asset materialize` {cli['total_s']} s vs bare spark-submit {bare['total_s']} s "
        f"(ratio {result['ratio']}): "
        f"{split}; jar (class) loading {cli['class_loading_s']} s inside the Spark phases "
        f"(bare: Spark start {bare['spark_start_s']} s, session {bare['session_and_catalog_s']} s, "
        f"work {bare['work_s']} s)"
    )

"""A spark-submit that leaves a profile: Spark's event log and the driver's HotSpot counters.

Both settings reach the driver JVM through SPARK_SUBMIT_OPTS (Spark reads `-Dspark.*` system properties
as configuration), so the job runs unchanged, and with the same classpath, hence the same
class-sharing archive (lineage_assets/spark_conf.py), as without the profile.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
from pathlib import Path

SQL_START = "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart"
SQL_END = "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd"


@contextlib.contextmanager
def driver_options(options: str):
    """JVM options for the driver of every spark-submit started meanwhile (from this process or its
    children): spark-submit passes SPARK_SUBMIT_OPTS from the environment it inherits to the driver JVM."""
    if not options:
        yield
        return
    previous = os.environ.get("SPARK_SUBMIT_OPTS")
    os.environ["SPARK_SUBMIT_OPTS"] = " ".join(filter(None, [previous, options]))
    try:
        yield
    finally:
        if previous is None:
            del os.environ["SPARK_SUBMIT_OPTS"]
        else:
            os.environ["SPARK_SUBMIT_OPTS"] = previous


class Instrumented:
    """Driver options that make a spark-submit leave its event log and HotSpot counters in ``folder``."""

    def __init__(self, folder: Path):
        self.events, self.counters = folder / "events", folder / "driver.hsperf"
        self.events.mkdir(parents=True, exist_ok=True)
        self.options = " ".join(
            [
                "-Dspark.eventLog.enabled=true",
                f"-Dspark.eventLog.dir=file://{self.events}",
                "-Dspark.eventLog.compress=false",
                "-Dspark.eventLog.rolling.enabled=false",
                "-XX:+PerfDataSaveToFile",
                f"-XX:PerfDataSaveFile={self.counters}",
            ]
        )

    def active(self):
        return driver_options(self.options)

    def reset(self) -> None:
        for log in self.events.iterdir():
            log.unlink()
        self.counters.unlink(missing_ok=True)

    def spark_times(self) -> dict:
        """Wall-clock seconds of the last run's Spark milestones, and its driver's class-loading time."""
        (log,) = self.events.iterdir()
        events = [json.loads(line) for line in log.read_text().splitlines()]
        starts = [e["time"] for e in events if e["Event"] == SQL_START]
        ends = [e["time"] for e in events if e["Event"] == SQL_END]
        at = lambda name: next(e["Timestamp"] for e in events if e["Event"] == name) / 1000  # noqa: E731
        counters = hotspot_counters(self.counters)
        return {
            "jvm_created": counters["sun.rt.createVmBeginTime"] / 1000,
            "context_started": at("SparkListenerApplicationStart"),
            "first_sql": min(starts) / 1000,
            "last_sql": max(ends) / 1000,
            "stopped": at("SparkListenerApplicationEnd"),
            "class_loading_s": counters["sun.cls.time"] / counters["sun.os.hrt.frequency"],
            "classes_loaded": counters["java.cls.loadedClasses"] + counters["java.cls.sharedLoadedClasses"],
        }

    def sql_profile(self) -> list[dict]:
        """The last run's Spark SQL executions, in order: what each was (its first line) and its seconds,
        with the tasks of the stages it ran."""
        (log,) = self.events.iterdir()
        events = [json.loads(line) for line in log.read_text().splitlines()]
        ends = {e["executionId"]: e["time"] for e in events if e["Event"] == SQL_END}
        tasks: dict[int, int] = {}  # execution id -> tasks, through the jobs it started
        for e in events:
            if e["Event"] == "SparkListenerJobStart":
                execution = e.get("Properties", {}).get("spark.sql.execution.id")
                if execution is not None:
                    tasks[int(execution)] = tasks.get(int(execution), 0) + sum(
                        s["Number of Tasks"] for s in e["Stage Infos"]
                    )
        return [
            {
                "sql": _what(e),
                "s": round((ends[e["executionId"]] - e["time"]) / 1000, 3),
                "tasks": tasks.get(e["executionId"], 0),
            }
            for e in events
            if e["Event"] == SQL_START and e["executionId"] in ends
        ]


def hotspot_counters(path: Path) -> dict[str, int]:
    snapshot = subprocess.run(
        ["jstat", "-J-Djstat.showUnsupported=true", "-snap", f"file://{path}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    pairs = (line.split("=", 1) for line in snapshot.splitlines() if "=" in line)
    return {key: int(value) for key, value in pairs if value.isdigit()}


def _what(execution: dict) -> str:
    """What an execution did: its plan's top operator, and where it came from (a streaming
    micro-batch, or the action's description)."""
    plan = execution.get("physicalPlanDescription", "").splitlines()
    operator = re.sub(r"^[*\s]+|\s*\(\d+\)$", "", plan[1]) if len(plan) > 1 else "?"
    description = (execution.get("description") or "").splitlines()
    streaming = "DataStreamWriter.start" in execution.get("details", "")
    origin = "in the micro-batch" if streaming else (description[0] if description else "")
    return f"{operator} ({origin})" if origin else operator

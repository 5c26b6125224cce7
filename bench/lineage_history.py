"""Lineage at production size: a history written through the project's own emitter and event
builders, and what the lineage commands cost on it.

The history (``write_history``), per simulated hour: one Dagster run that produces orders and
recomputes that day's `supplier_stats` partition, with the three asset checks evaluated on their
own; the three streaming jobs deployed (archive, live windows, ingestion with its schema check), each
a run that sends a RUNNING event every ``running_interval`` seconds and is restarted once a week
(COMPLETE, then a new run). One hourly run in ``FAIL_ONE_IN`` fails in `supplier_stats`, one in
``ABORT_ONE_IN`` is cancelled; on ``drift_day`` a producer's new writer version stops the ingestion
(its schema check fails and the deployment FAILs) until the reader is taught and the records
replayed an hour later. Every event is one a real run sends: the same builders, facets and sizes.

The measure (``run``): the history written into a fresh state folder; the log's summaries built from
it once (what readers otherwise keep up to date as the log grows); then `lineage check`, `impact`,
`trace`, `show` and `provenance` run from the command line on it as a user runs them; and one
emission's cost at the end of that log and on an empty one.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import os
import random
import resource
import subprocess
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from openlineage.client.event_v2 import RunState

from lineage_assets.datasets import (
    ARCHIVE,
    CHECKS,
    DATASETS,
    LAKEHOUSE_ORDERS,
    LAKEHOUSE_SUPPLIERS,
    ORDERS,
    ORDERS_AVRO_SCHEMA,
    SUPPLIER_STATS,
    SUPPLIER_STATS_LIVE,
    SUPPLIERS,
    SUPPLIERS_AVRO_SCHEMA,
    Dataset,
)
from lineage_assets.lineage import events
from lineage_assets.lineage.emitter import LineageEmitter
from lineage_assets.lineage.facets import StreamingProgressRunFacet
from lineage_assets.lineage.observed import as_designed
from lineage_assets.lineage.run_facts import (
    NO_FACTS,
    Assertion,
    DagsterRun,
    DatasetVersion,
    JobError,
    OffsetRange,
    OutputStatistics,
    RunFacts,
    WrittenFile,
    offset_ranges,
    orders_read,
    snapshot_written,
    table_read,
    topic_read,
)
from lineage_assets.lineage.summary import runs as runs_of_log
from lineage_assets.lineage.summary import summary as summary_of
from lineage_assets.settings import PROJECT_ROOT, Settings
from lineage_assets.settings_environment import as_environment, settings_from_env

START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
ORDERS_PER_HOUR = 3600
RUNNING_INTERVAL_S = 300
RESTART_EVERY_DAYS = 7
FAIL_ONE_IN, ABORT_ONE_IN = 200, 500
DEPLOYED = (ARCHIVE, SUPPLIER_STATS_LIVE, LAKEHOUSE_ORDERS)
COMPUTED = tuple(d for d in DATASETS.values() if d.computed_by is not None)  # after supplier_stats, each hour
# The commands timed on the history, and their targets (seconds), from the scale targets.
COMMANDS = {
    "check": (["check"], 5.0),
    "impact": (["impact", f"{LAKEHOUSE_ORDERS.key}.price"], 1.0),
    "trace": (["trace", f"{SUPPLIER_STATS.key}.total_price"], 1.0),
    "show": (["show", "--out", "{folder}/lineage.html"], 10.0),
    "provenance": (["provenance", SUPPLIER_STATS.key], None),
}
COMMAND_TIMEOUT_S = 600
COMMAND_MEMORY_BYTES = 8 * 2**30  # a command that needs more is reported as failing, not left to swap


@dataclass
class Topic:
    """A topic's end offsets per partition, as the history writes it."""

    name: str
    partitions: int
    ends: dict[int, int] = field(default_factory=dict)

    def write(self, records: int) -> tuple[OffsetRange, ...]:
        written = []
        for partition in range(self.partitions):
            start = self.ends.get(partition, 0)
            self.ends[partition] = start + records // self.partitions
            written.append(OffsetRange(partition, start, self.ends[partition]))
        return tuple(written)

    def offsets(self) -> dict:
        """As Spark's offset maps spell them."""
        return {self.name: {str(p): end for p, end in self.ends.items()}}


def writer_version(version: int, records: int, readable: bool, schema: dict = ORDERS_AVRO_SCHEMA) -> dict:
    """A ``schemaVersions`` entry as a job reports it."""
    fields = [[f["name"], str(f["type"])] for f in schema["fields"]]
    problems = [] if readable else ["field supplier is missing (removed or renamed)"]
    return {
        "version": version,
        "schema_id": version,
        "records": records,
        "readable": readable,
        "problems": problems,
        "fields": fields,
    }


def table_quality(rows: int) -> dict:
    return {
        "rows": rows,
        "bytes": rows * 48,
        "files": max(1, rows // 50_000),
        "columns": {"order_id": {"nulls": 0}, "price": {"nulls": 0, "min": 0.5, "max": 999.99}},
    }


@dataclass
class Deployment:
    dataset: Dataset
    run_id: str = ""
    started: dt.datetime | None = None
    read_from: dict = field(default_factory=dict)
    written_from: dict = field(default_factory=dict)
    parent_snapshot: int | None = None
    rows: int = 0
    days: set = field(default_factory=set)
    lineage_sent: bool = False  # a RUNNING event carries the column lineage only when its run has not sent it


class History:
    """The state a year of runs moves through, and the emitter it writes with."""

    def __init__(self, emitter: LineageEmitter, settings: Settings, seed: int, running_interval_s: int):
        self.emitter, self.settings, self.rng = emitter, settings, random.Random(seed)
        # Marquez keys a run by its id alone: histories under two namespaces share a shape, never an id.
        self.id_mask = int.from_bytes(hashlib.sha256(settings.lineage_namespace.encode()).digest()[:16])
        self.running_interval_s = running_interval_s
        self.orders = Topic(settings.orders_topic, settings.orders_partitions)
        self.windows = Topic(settings.supplier_stats_topic, 1)
        self.suppliers = Topic(settings.suppliers_topic, 1)
        self.snapshot = 0  # of lakehouse/orders
        self.stats_snapshot = 0
        self.dimension_snapshot = 0  # of lakehouse/suppliers
        self.table_rows = 0
        self.schema_version = 1
        self.counts: Counter[str] = Counter()
        self.deployments = {d.key: Deployment(d) for d in DEPLOYED}

    def emit(self, event, kind: str) -> None:
        self.emitter.emit(event)
        self.counts["events"] += 1
        self.counts[f"events: {kind}"] += 1

    def new_id(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128) ^ self.id_mask, version=4))

    # --- the hourly Dagster run ---------------------------------------------------------------
    def hourly_run(self, at: dt.datetime, hour_number: int) -> None:
        run = DagsterRun(run_id=self.new_id(), job_name="hourly_assets", started_at=at)
        self.emit(events.dagster_run_event(RunState.START, run, self.settings, event_time=at), "dagster run")
        self.counts["runs: dagster"] += 1
        produced = self.orders.write(ORDERS_PER_HOUR)
        orders = RunFacts(
            OutputStatistics(rows=ORDERS_PER_HOUR),
            version=DatasetVersion(f"{ORDERS.key}-value:{self.schema_version}"),
            offsets=produced,
        )
        self.asset_run(run, ORDERS, orders, at + dt.timedelta(seconds=5), at + dt.timedelta(seconds=20))
        self.dimension_run(run, at)
        day = at.date().isoformat()
        failing = hour_number % FAIL_ONE_IN == FAIL_ONE_IN - 1
        aborted = hour_number % ABORT_ONE_IN == ABORT_ONE_IN - 1
        stats_end = at + dt.timedelta(seconds=60)
        if failing or aborted:
            state = RunState.FAIL if failing else RunState.ABORT
            error = JobError("org.apache.spark.SparkException: Job aborted") if failing else None
            self.asset_run(run, SUPPLIER_STATS, NO_FACTS, at + dt.timedelta(seconds=25), stats_end, state, error)
            ended = RunState.FAIL if failing else RunState.ABORT
        else:
            previous, self.stats_snapshot = self.stats_snapshot, self.stats_snapshot + 1
            stats = RunFacts(
                OutputStatistics(rows=8 * 24, bytes=9000, files=1),
                "OVERWRITE",
                version=snapshot_written(
                    9_000_000 + self.stats_snapshot, 0, 9_000_000 + previous if previous else None
                ),
                quality=table_quality(8 * 24 * (at.timetuple().tm_yday)),
                reads=(table_read(LAKEHOUSE_ORDERS, self.snapshot or None, 0),),
                observation=as_designed(SUPPLIER_STATS),
                partitions=(day,),
            )
            self.asset_run(run, SUPPLIER_STATS, stats, at + dt.timedelta(seconds=25), stats_end)
            for computed in COMPUTED:
                snapshots = {SUPPLIER_STATS.key: 9_000_000 + self.stats_snapshot, LAKEHOUSE_ORDERS.key: self.snapshot}
                snapshots[LAKEHOUSE_SUPPLIERS.key] = 7_000_000 + self.dimension_snapshot
                table = RunFacts(
                    OutputStatistics(rows=8, bytes=3000, files=1),
                    "OVERWRITE",
                    version=snapshot_written(
                        8_000_000 + self.stats_snapshot, 0, 8_000_000 + previous if previous else None
                    ),
                    reads=tuple(table_read(DATASETS[key], snapshots[key] or None, 0) for key in computed.inputs),
                    observation=as_designed(computed),
                    partitions=(day,),
                )
                self.asset_run(run, computed, table, stats_end, stats_end + dt.timedelta(seconds=20))
            ended = RunState.COMPLETE
        for check in CHECKS.values():
            checked_at = stats_end + dt.timedelta(seconds=5)
            rows = str(self.table_rows)
            assertion = Assertion(check.name, "row_count", True, check.description, expected=rows, actual=rows)
            for state in (RunState.START, RunState.COMPLETE):
                assertions = (assertion,) if state == RunState.COMPLETE else ()
                self.emit(
                    events.check_event(state, check, run, self.settings, assertions=assertions, event_time=checked_at),
                    "check",
                )
            self.counts["runs: check"] += 1
        self.emit(
            events.dagster_run_event(ended, run, self.settings, event_time=stats_end + dt.timedelta(seconds=10)),
            "dagster run",
        )

    def dimension_run(self, run: DagsterRun, at: dt.datetime) -> None:
        """A change of a supplier produced, and merged into the dimension's table."""
        version = DatasetVersion(f"{SUPPLIERS.key}-value:1")
        read_from = self.suppliers.offsets()
        changed = RunFacts(OutputStatistics(rows=1), version=version, offsets=self.suppliers.write(1))
        self.asset_run(run, SUPPLIERS, changed, at + dt.timedelta(seconds=5), at + dt.timedelta(seconds=10))
        previous, self.dimension_snapshot = self.dimension_snapshot, self.dimension_snapshot + 1
        merged = RunFacts(
            OutputStatistics(rows=1),
            version=snapshot_written(
                7_000_000 + self.dimension_snapshot, 0, 7_000_000 + previous if previous else None
            ),
            reads=(
                topic_read(
                    SUPPLIERS,
                    self.suppliers.name,
                    [writer_version(1, 1, True, SUPPLIERS_AVRO_SCHEMA)],
                    (),
                    read_from,
                    self.suppliers.offsets(),
                ),
            ),
            observation=as_designed(LAKEHOUSE_SUPPLIERS),
        )
        self.asset_run(run, LAKEHOUSE_SUPPLIERS, merged, at + dt.timedelta(seconds=10), at + dt.timedelta(seconds=20))

    def asset_run(self, run, dataset, facts, start, end, state=RunState.COMPLETE, error=None) -> None:
        self.emit(events.asset_event(RunState.START, dataset, run, self.settings, event_time=start), "asset")
        self.emit(events.asset_event(state, dataset, run, self.settings, facts, error=error, event_time=end), "asset")
        self.counts[f"runs: {dataset.key}"] += 1
        self.counts[f"runs ended {state.value}"] += 1

    # --- the deployments ----------------------------------------------------------------------
    def deploy(self, deployment: Deployment, at: dt.datetime) -> None:
        deployment.run_id, deployment.started = self.new_id(), at
        deployment.read_from, deployment.written_from = self.orders.offsets(), self.windows.offsets()
        deployment.parent_snapshot, deployment.rows, deployment.days = self.snapshot or None, 0, set()
        deployment.lineage_sent = False
        self.emit(self.deployment_event(deployment, RunState.START, NO_FACTS, at), "deployment")
        self.counts[f"runs: {deployment.dataset.key} deployment"] += 1

    def deployment_event(self, deployment: Deployment, state, facts, at, progress=None, error=None):
        return events.asset_event(
            state,
            deployment.dataset,
            None,
            self.settings,
            facts,
            run_id=deployment.run_id,
            event_time=at,
            running_interval=self.running_interval_s,
            progress=progress,
            error=error,
        )

    def running(self, deployment: Deployment, at: dt.datetime, drifted: bool, state=RunState.RUNNING, error=None):
        """A RUNNING (or terminal) event of a deployment after one more interval of records."""
        interval_orders = ORDERS_PER_HOUR * self.running_interval_s // 3600
        deployment.rows += interval_orders
        deployment.days.add(at.date().isoformat())
        readable = [writer_version(1, deployment.rows, True)]
        assertions: tuple[Assertion, ...] = ()
        dataset = deployment.dataset
        if drifted or self.schema_version == 2:  # waiting in the dead letters, or read once taught
            readable.append(writer_version(2, interval_orders // 10, not drifted))
        if dataset is LAKEHOUSE_ORDERS:
            failed = str(interval_orders // 10) if drifted else "0"
            check = Assertion(
                "orders_schema_readable",
                "schema_compatible",
                not drifted,
                "no record waits",
                expected="0",
                actual=failed,
                blocking=True,
            )
            assertions = (check,)
        read = orders_read(self.settings, readable, assertions, deployment.read_from, self.orders.offsets())
        repeat = state is not RunState.RUNNING or not deployment.lineage_sent
        deployment.lineage_sent = True
        facts = RunFacts(
            OutputStatistics(rows=deployment.rows),
            reads=(read,),
            observation=as_designed(dataset) if repeat else None,
        )
        if dataset is LAKEHOUSE_ORDERS and not drifted:
            self.snapshot += 1
            self.table_rows += interval_orders
            facts = RunFacts(
                facts.statistics,
                version=snapshot_written(self.snapshot, 0, deployment.parent_snapshot),
                quality=table_quality(self.table_rows),
                reads=facts.reads,
                observation=facts.observation,
                partitions=tuple(sorted(deployment.days)),
            )
        elif dataset is SUPPLIER_STATS_LIVE:
            self.windows.write(interval_orders // 45)
            written = offset_ranges(self.windows.name, deployment.written_from, self.windows.offsets())
            facts = RunFacts(facts.statistics, reads=facts.reads, observation=facts.observation, offsets=written)
        elif dataset is ARCHIVE:
            hour = at.strftime("date=%Y-%m-%d/hour=%H")
            added = (WrittenFile(f"{hour}/part-{self.new_id()}.c000.json", interval_orders * 220),)
            facts = RunFacts(facts.statistics, reads=facts.reads, observation=facts.observation, files=added)
        progress = StreamingProgressRunFacet(processedRows=deployment.rows, sourceOffsets=self.orders.offsets())
        self.emit(self.deployment_event(deployment, state, facts, at, progress, error), "deployment")

    def end(self, deployment: Deployment, at: dt.datetime, state: RunState, error=None, drifted=False) -> None:
        self.running(deployment, at, drifted, state, error)
        self.counts[f"runs ended {state.value}"] += 1


def write_history(
    emitter: LineageEmitter,
    settings: Settings,
    days: int,
    *,
    seed: int = 7,
    running_interval_s: int = RUNNING_INTERVAL_S,
    drift_day: int | None = None,
    start: dt.datetime = START,
) -> Counter[str]:
    """``days`` of lineage (module docstring) from ``start`` through ``emitter``; the counts of what it wrote."""
    history = History(emitter, settings, seed, running_interval_s)
    for deployment in history.deployments.values():
        history.deploy(deployment, start)
    ingestion = history.deployments[LAKEHOUSE_ORDERS.key]
    drift_hour = None if drift_day is None else drift_day * 24 + 10
    for hour_number in range(days * 24):
        at = start + dt.timedelta(hours=hour_number)
        if hour_number and hour_number % (RESTART_EVERY_DAYS * 24) == 0:
            for deployment in history.deployments.values():
                history.end(deployment, at, RunState.COMPLETE)
                history.deploy(deployment, at + dt.timedelta(seconds=30))
        history.hourly_run(at, hour_number)
        if hour_number == drift_hour:  # the producer's new version arrives; the ingestion stops on it
            history.schema_version = 2
            history.running(ingestion, at + dt.timedelta(minutes=1), True)
            failure = JobError("schema_incompatible: orders-value version 2")
            history.end(ingestion, at + dt.timedelta(minutes=2), RunState.FAIL, failure, drifted=True)
            history.counts["schema drifts"] += 1
        if drift_hour is not None and hour_number == drift_hour + 1:  # taught, replayed, deployed again
            history.deploy(ingestion, at)
            history.counts["replays"] += 1
        for step in range(3600 // running_interval_s):
            for deployment in history.deployments.values():
                stopped = drift_hour is not None and hour_number == drift_hour and deployment is ingestion
                if not stopped:
                    history.running(deployment, at + dt.timedelta(seconds=(step + 1) * running_interval_s - 1), False)
    history.counts["runs"] = sum(n for kind, n in history.counts.items() if kind.startswith("runs: "))
    return history.counts


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (COMMAND_MEMORY_BYTES, COMMAND_MEMORY_BYTES))


def time_commands(settings: Settings, folder: Path) -> dict:
    """Each lineage command on the history, from the command line: seconds, or what stopped it."""
    environment = {**os.environ, **as_environment(settings)}
    timed = {}
    for name, (arguments, target) in COMMANDS.items():
        command = [str(PROJECT_ROOT / ".venv" / "bin" / "lineage-assets"), "lineage"]
        command += [a.format(folder=folder) for a in arguments]
        started = time.monotonic()
        try:
            done = subprocess.run(
                command, env=environment, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, preexec_fn=_limited
            )
            seconds = round(time.monotonic() - started, 2)
            problem = None if done.returncode in (0, 1) else (done.stderr.strip().splitlines() or ["?"])[-1]
        except subprocess.TimeoutExpired:
            seconds, problem = None, f"more than {COMMAND_TIMEOUT_S} s"
        timed[name] = {"seconds": seconds, "target_s": target, **({"error": problem} if problem else {})}
    return timed


def emission_ms(emitter: LineageEmitter, event: dict, count: int = 2000) -> dict:
    """Percentiles of one ``emit`` (the append to the log), over ``count`` emits of ``event``."""
    took = []
    for _ in range(count):
        started = time.perf_counter()
        emitter.emit(event)
        took.append((time.perf_counter() - started) * 1000)
    took.sort()
    return {"p50": round(took[len(took) // 2], 3), "p99": round(took[int(len(took) * 0.99)], 3)}


def run(quick: bool) -> dict:
    days = 7 if quick else 365
    with tempfile.TemporaryDirectory() as folder:
        settings = dataclasses.replace(settings_from_env(), state_dir=Path(folder))
        emitter = LineageEmitter(settings.lineage_dir, None, settings.lineage_segment_mb * 2**20)
        started = time.monotonic()
        counts = write_history(emitter, settings, days, drift_day=days // 2)
        written_s = time.monotonic() - started
        log = emitter.log
        size, segments = sum(segment.size() for segment in log.segments()), len(log.segments())
        last = json.loads(list(log.lines(log.segments()[-1].base))[-1].text)  # a deployment's RUNNING event
        started = time.monotonic()
        summary_of(log), runs_of_log(log)
        summary_s = time.monotonic() - started  # from nothing: a rebuild; a reader otherwise folds what is new
        commands = time_commands(settings, Path(folder))
        # The history was written in minutes, not a year: its dirty pages would slow any write now.
        os.sync()
        emission = {"year's log" if not quick else "week's log": emission_ms(emitter, last)}
        empty = LineageEmitter(Path(folder) / "empty", None)
        emission["empty log"] = emission_ms(empty, last)
    met = all(
        c.get("seconds") is not None and (c["target_s"] is None or c["seconds"] <= c["target_s"])
        for c in commands.values()
    ) and all(e["p99"] <= 1.0 for e in emission.values())
    return {
        "name": "lineage_history",
        "target": "check <= 5 s, impact and trace <= 1 s, show <= 10 s, emission p99 <= 1 ms",
        "met": met,
        "days": days,
        "counts": dict(sorted(counts.items())),
        "log_bytes": size,
        "segments": segments,
        "write_s": round(written_s, 1),
        "summary_rebuild_s": round(summary_s, 1),
        "emission_ms": emission,
        "commands": commands,
    }


def summary(result: dict) -> str:
    timed = ", ".join(
        f"{name} {c['seconds']} s" if c.get("seconds") is not None else f"{name}: {c.get('error')}"
        for name, c in result["commands"].items()
    )
    emission = ", ".join(f"{where} p99 {e['p99']} ms" for where, e in result["emission_ms"].items())
    return (
        f"{result['days']} days: {result['counts']['runs']:,} runs, {result['counts']['events']:,} events, "
        f"{result['log_bytes'] / 2**20:,.0f} MB in {result['segments']} segments; summaries rebuilt in "
        f"{result['summary_rebuild_s']} s; {timed}; emission {emission}"
    )

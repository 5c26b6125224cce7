"""The main job: bring the stack up and materialize every asset in order on a bounded set of orders;
its summary, and the schema drift story (``--drift``). Where the runs run is demo_runs.py's.

Runs go to the Dagster instance under the state folder (``DAGSTER_HOME``), so ``make dev`` shows
them afterwards.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections import defaultdict
from contextlib import nullcontext
from dataclasses import dataclass, field
from decimal import Decimal

import dagster as dg

from lineage_assets.assets.common import asset_key
from lineage_assets.assets.design import published_line
from lineage_assets.assets.in_progress import lineage_runs_in_progress
from lineage_assets.assets.lakehouse import days_behind, rebuild_supplier_stats
from lineage_assets.assets.lakehouse_upkeep import UNFINISHED_RUN_STATUSES
from lineage_assets.assets.orders import OrdersConfig
from lineage_assets.datasets import (
    DATASETS,
    LAKEHOUSE_ORDERS,
    LINEAGE_CHECK,
    ORDERS,
    ORDERS_AVRO_SCHEMA,
    SUPPLIER_STATS,
    SUPPLIERS,
    Dataset,
)
from lineage_assets.dead_letters import TEACH_THEN_REPLAY
from lineage_assets.definitions import build_definitions, publish_definitions
from lineage_assets.demo_runs import (
    STREAMING,
    InProcess,
    RunEvents,
    ThroughServices,
    dagster_instance,
    demo_claim,
    pipeline_runs,
)
from lineage_assets.generator import GeneratedOrder, GeneratorConfig, generate_orders, produce_orders
from lineage_assets.lineage.check import (
    InProgress,
    check_log,
    check_marquez_with_design,
    log_design,
    log_notes,
    report,
    retire,
)
from lineage_assets.lineage.delivery import marquez_backend
from lineage_assets.lineage.emitter import LineageEmitter, emitter_for
from lineage_assets.lineage.marquez import MarquezApi, MarquezError, lineage_page
from lineage_assets.lineage.queries import ask
from lineage_assets.preflight import require_services
from lineage_assets.resources.kafka import KafkaResource
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.settings import Settings
from lineage_assets.source_schemas import value_subject
from lineage_assets.stack.supervisor import Supervisor


@dataclass
class PipelineRun:
    """What one pass over the pipeline did, read back from the materializations' metadata."""

    rows: dict[str, int] = field(default_factory=dict)
    dead_letters: int = 0
    days: list[str] = field(default_factory=list)
    supplier_totals: dict[str, dict[str, tuple[Decimal, int]]] = field(
        default_factory=dict
    )  # day -> supplier -> (total, count)
    checks: dict[str, bool | None] = field(default_factory=dict)  # None: skipped, its asset failed a blocking check
    held_back: list[str] = field(
        default_factory=list
    )  # days supplier_stats waits on (schema_incompatible dead letters)
    outstanding: int = 0  # those dead letters, not replayed yet
    # day -> each daily table computed from supplier_stats: its rows, and which state of each input it read
    tables: dict[str, dict[str, tuple[list[dict], dict[str, str]]]] = field(default_factory=dict)
    run_ids: list[str] = field(default_factory=list)  # the Dagster runs, in order
    built_by: dict[str, str] = field(default_factory=dict)  # day -> the run that built it (this pass's or a sensor's)

    def read_day(self, day: str, built: RunEvents) -> None:
        """A day's figures from the run that built it."""
        self.supplier_totals[day] = supplier_totals(built.metadata(SUPPLIER_STATS))
        for dataset in COMPUTED:
            if metadata := built.metadata(dataset):  # none: held back by its upstream's failed blocking check
                self.tables.setdefault(day, {})[dataset.key] = (metadata["rows"], metadata["read_as_of"])


CHECK_OUTCOMES = {True: "passed", False: "FAILED", None: "skipped"}
COMPUTED = tuple(d for d in DATASETS.values() if d.computed_by is not None)  # daily tables of a transform
DAILY = (SUPPLIER_STATS, *COMPUTED)  # what a day's rebuild computes, in order


def table_lines(dataset: Dataset, rows: list[dict]) -> list[str]:
    """A daily table's rows of one day as aligned columns (without the day's own column)."""
    day_column = dataset.computed_by.partition_column if dataset.computed_by else None
    columns = [c.name for c in dataset.columns if c.name != day_column]
    cells = [columns] + [["-" if row[c] is None else str(row[c]) for c in columns] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    return ["  " + "  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in cells]


DEMO_LATE_FRACTION, DEMO_BAD_FRACTION = 0.03, 0.04


def run_pipeline(
    environment: SettingsResource,
    instance: dg.DagsterInstance,
    orders_config: dict | None,
    log=print,
    runs: InProcess | ThroughServices | None = None,
) -> PipelineRun:
    """Generate orders (unless ``orders_config`` is None), run the streaming jobs, then
    ``supplier_stats`` for every day the ingestion touched, with all asset checks; ``runs``: in this
    process (the default: under the demo's claim, refused before it produces an order while a
    streaming job runs elsewhere) or through Dagster's services."""
    runs = runs or InProcess(environment, instance)
    definitions = build_definitions(environment)
    with runs.claim():
        run = PipelineRun()

        if orders_config is not None:
            log(f"orders: producing {orders_config.get('count', 'the default number of')} orders, and the suppliers")
            config = {
                ORDERS.node_name: {"config": orders_config},
                SUPPLIERS.node_name: {"config": suppliers_config(orders_config)},
            }
            result = runs.run([asset_key(ORDERS), asset_key(SUPPLIERS)], run_config={"ops": config})
            run.run_ids.append(result.run_id)
            result.raise_failures()
            for source in (ORDERS, SUPPLIERS):
                run.rows[source.key] = result.metadata(source)["rows_out"]

        log("streaming jobs (catch-up): " + ", ".join(d.key for d in STREAMING))
        streaming = [asset_key(d) for d in STREAMING]
        result = runs.run(streaming)
        run.run_ids.append(result.run_id)
        result.raise_failures()
        for dataset in STREAMING:
            run.rows[dataset.key] = result.metadata(dataset)["rows_out"]
        ingestion = result.metadata(LAKEHOUSE_ORDERS)
        run.dead_letters = ingestion["dead_letters"]
        # A daemon's sensor on this instance (the services', or `make dev`'s) may build the days first.
        builds_ended(instance, log)
        run.days = days_behind(instance)  # this pass's days and any an earlier one left behind, without those held back
        run.held_back, run.outstanding = list(ingestion["days_held_back"]), ingestion["schema_incompatible_outstanding"]
        run.checks.update(result.checks(definitions, streaming))
        if not run.checks.get(f"{LINEAGE_CHECK} of {LAKEHOUSE_ORDERS.key}", True):
            # Blocking: the daily totals must not be computed from a derivation nobody reviewed.
            log(f"supplier_stats: not computed, the lineage of {LAKEHOUSE_ORDERS.key} differs from its design")
            return run

        for day in run.days:
            log(f"{', '.join(d.key for d in DAILY)}: day {day}")
            daily = [asset_key(d) for d in DAILY]
            result = runs.run(daily, partition_key=day)
            run.run_ids.append(result.run_id)
            result.raise_failures()
            run.checks.update(result.checks(definitions, daily))
            run.built_by[day] = result.run_id
            for dataset in DAILY:
                # Nothing from an asset held back by its upstream's failed blocking check.
                run.rows[dataset.key] = run.rows.get(dataset.key, 0) + result.metadata(dataset).get("rows_out", 0)
            run.read_day(day, result)
        for day in ingestion.get("days", []):
            if day not in run.supplier_totals and (built := last_build(instance, day)) is not None:
                run.built_by[day] = built.run_id
                run.read_day(day, built)
                run.checks.update(built.checks(definitions))
        return run


def suppliers_config(orders_config: dict) -> dict:
    """The supplier dimension's changes over the span of the orders ``orders_config`` generates (a
    record without a region among them when some orders are bad)."""
    count = orders_config.get("count", OrdersConfig().count)
    span = count * orders_config.get("interval_seconds", OrdersConfig().interval_seconds)
    return {
        "seed": orders_config.get("seed", OrdersConfig().seed),
        **({"start": orders_config["start"]} if orders_config.get("start") else {}),
        "span_seconds": span,
        "bad": 1 if orders_config.get("bad_fraction") else 0,
    }


def supplier_totals(stats: dict) -> dict[str, tuple[Decimal, int]]:
    """Each supplier's total and count over a day, from its ``supplier_stats`` materialization's metadata."""
    totals: dict[str, tuple[Decimal, int]] = defaultdict(lambda: (Decimal("0"), 0))
    for row in stats["totals"]:
        total, count = totals[row["supplier"]]
        totals[row["supplier"]] = (total + Decimal(row["total_price"]), count + row["total_count"])
    return dict(totals)


def _builds(instance: dg.DagsterInstance, statuses: list[dg.DagsterRunStatus]) -> list[dg.DagsterRun]:
    runs = instance.get_runs(dg.RunsFilter(statuses=statuses))
    return [
        run
        for run in runs
        if run.job_name == rebuild_supplier_stats.name or asset_key(SUPPLIER_STATS) in (run.asset_selection or ())
    ]


def builds_ended(instance: dg.DagsterInstance, log=print, poll_s: float = 1.0) -> None:
    """Once the runs of ``supplier_stats`` queued or under way on the instance have ended (those a
    sensor launched for days this pass released), said every minute while they run."""
    said = time.monotonic()
    while waiting := _builds(instance, UNFINISHED_RUN_STATUSES):
        if time.monotonic() - said >= ThroughServices.SAY_EVERY_S:
            log(f"  waiting for {', '.join(run.run_id for run in waiting)} (supplier_stats, launched by another)")
            said = time.monotonic()
        time.sleep(poll_s)


def last_build(instance: dg.DagsterInstance, day: str) -> RunEvents | None:
    """The run of the day's latest ``supplier_stats`` materialization, if any."""
    day_filter = dg.AssetRecordsFilter(asset_key(SUPPLIER_STATS), asset_partitions=[day])
    records = instance.fetch_materializations(day_filter, limit=1, ascending=False).records
    return RunEvents.in_instance(instance, records[0].run_id) if records else None


def summary(run: PipelineRun, settings: Settings) -> str:
    stats = SUPPLIER_STATS.identity(settings)
    lines = ["", "Rows written per asset in this run:"]
    lines += [f"  {key:<26} {rows}" for key, rows in run.rows.items()]
    lines.append(f"  {'dead letters (orders-dlq)':<26} {run.dead_letters}")
    if run.held_back:
        lines.append(
            f"supplier_stats held back for {', '.join(run.held_back)}: {run.outstanding} records wait in the "
            f"dead-letter topic for a schema version the pipeline cannot read; {TEACH_THEN_REPLAY} "
            f"and materialize again."
        )
    for day, totals in run.supplier_totals.items():
        by = f", built by run {run.built_by[day]}" if run.built_by.get(day) not in run.run_ids else ""
        lines.append(f"Supplier totals for {day} (from lakehouse/supplier_stats{by}):")
        lines += [
            f"  {supplier:<8} {total:>12}  {count:>6} orders" for supplier, (total, count) in sorted(totals.items())
        ]
        for key, (rows, read_as_of) in run.tables.get(day, {}).items():
            states = ", ".join(f"{read} {state}" for read, state in read_as_of.items())
            lines.append(f"{key} for {day} (read: {states}):")
            lines += table_lines(DATASETS[key], rows)
    if run.checks:
        lines.append("Asset checks: " + ", ".join(f"{name} {CHECK_OUTCOMES[ok]}" for name, ok in run.checks.items()))
    lines += [
        "",
        f"Next: the lineage of supplier_stats in Marquez's UI, {lineage_page(settings, stats.namespace, stats.name)}",
        "      (*Full Graph* shows every job and dataset);",
        f"      the stack's Dagster webserver shows these runs on {settings.dagster_url};"
        if settings.dagster == "services"
        else f"      `make dev` opens the Dagster UI on {settings.dagster_url} with these runs;",
        "      `lineage-assets stack status` shows the servers; `make stack-down` stops them.",
    ]
    return "\n".join(lines)


def marquez_gaps(emitter: LineageEmitter, settings: Settings, in_progress: InProgress) -> list[str]:
    """The check of what Marquez shows (printed), when the lineage goes to Marquez and it answers."""
    if emitter.backend != marquez_backend(settings):
        print("lineage check in Marquez skipped: openlineage-python's configuration sends the lineage elsewhere")
        return []
    api = MarquezApi.of(settings)
    try:
        hidden = retire(api, settings, log_design(emitter.log))  # jobs renamed or retired since an earlier demo
        if hidden:
            print(f"hid in Marquez the jobs renamed or retired since: {', '.join(hidden)}")
        gaps, notes = check_marquez_with_design(api, settings, emitter.log, in_progress)
    except MarquezError as error:  # Marquez is down: its events wait in the log, whose check stands
        print(f"lineage check in Marquez skipped: {error}")
        return []
    print(report(gaps, f"the lineage in Marquez (its UI: {settings.marquez_web_url})", notes))
    return gaps


def main_demo(settings: Settings, orders: int, seed: int, continuous: bool = False) -> int:
    # Before the stack is touched, a second demo in process stops here, in one line; through the
    # services, the run queue orders the two demos' runs.
    with nullcontext() if settings.dagster == "services" else demo_claim(settings):
        Supervisor(settings, progress=print).up()
        require_services(settings)  # the ones run elsewhere too, before an order is produced
        print(published_line(publish_definitions(settings)))  # Marquez shows the designed graph before any run
        # Some late and some bad orders, so the watermark and the dead-letter topic have work to show.
        instance = dagster_instance(settings)
        run = run_pipeline(
            SettingsResource.of(settings),
            instance,
            {"count": orders, "seed": seed, "late_fraction": DEMO_LATE_FRACTION, "bad_fraction": DEMO_BAD_FRACTION},
            runs=pipeline_runs(settings, instance),
        )
    print(summary(run, settings))
    emitter = emitter_for(settings)
    if not emitter.flush(timeout=30):
        print(emitter.waiting_line())
    in_progress = lineage_runs_in_progress(instance)  # the demo's runs ended; a sensor's in `make dev` may not have
    gaps = check_log(emitter.log, settings, in_progress)
    where = f"the lineage in {emitter.log.segments_dir} ({len(emitter.events())} events)"
    print("\n" + report(gaps, where, log_notes(emitter.log, in_progress)))
    gaps += marquez_gaps(emitter, settings, in_progress)
    if continuous:
        from lineage_assets.job_specs import STREAMING_JOBS
        from lineage_assets.streaming.deployments import deployments_for

        deployments = deployments_for(settings)
        print("\nStreaming deployments (continuous mode):")
        for name in STREAMING_JOBS:
            print(f"  {name:<22} {deployments.deploy(name)}  log: {deployments.status(name).log}")
        print(
            "  `lineage-assets status` shows them; `lineage-assets stop` stops them (ABORT), "
            "`--drain` first finishes (COMPLETE)."
        )
    return 0 if all(run.checks.values()) and not gaps else 1


def renamed_field(schema: dict, old: str, new: str) -> dict:
    """The next version of ``schema`` a producer writes after renaming field ``old`` to ``new``."""
    return {**schema, "fields": [{**f, "name": new} if f["name"] == old else f for f in schema["fields"]]}


# The essay's incident: another team's producer renames a field the pipeline reads. A registry's
# BACKWARD rule lets it through (an optional field removed, an optional one added).
DRIFTED_ORDERS_SCHEMA = renamed_field(ORDERS_AVRO_SCHEMA, "supplier", "vendor")


def as_drifted(order: GeneratedOrder) -> GeneratedOrder:
    record = {("vendor" if name == "supplier" else name): value for name, value in order.record().items()}
    return dataclasses.replace(order, order=record)


DRIFTED_ORDERS, GOOD_ORDERS = 20, 30


def main_drift(settings: Settings, seed: int, drifted: int = DRIFTED_ORDERS, good: int = GOOD_ORDERS) -> int:
    """Another team's producer registers DRIFTED_ORDERS_SCHEMA and sends ``drifted`` orders with it
    among ``good`` ones; the streaming assets run. Exit 0 when the pipeline stopped the drift:
    every drifted record dead-lettered and supplier_stats held back."""
    # Before an order is produced, a second demo in process stops here, in one line.
    with nullcontext() if settings.dagster == "services" else demo_claim(settings):
        Supervisor(settings, progress=print).up()
        require_services(settings)
        environment = SettingsResource.of(settings)
        instance = dagster_instance(settings)
        as_before = list(generate_orders(GeneratorConfig(count=good, seed=seed)))
        renamed = [as_drifted(order) for order in generate_orders(GeneratorConfig(count=drifted, seed=seed + 1))]
        KafkaResource(environment=environment).ensure_orders_topics()  # on a stack where nothing ran yet
        produce_orders(as_before, settings)
        produce_orders(renamed, settings, value_schema=json.dumps(DRIFTED_ORDERS_SCHEMA))
        print(
            f"produced {good} orders as before and {drifted} with `supplier` renamed `vendor` (a new version of "
            f"{value_subject(settings.orders_topic)})"
        )
        run = run_pipeline(environment, instance, None, runs=pipeline_runs(settings, instance))
    print(summary(run, settings))
    emitter = emitter_for(settings)
    emitter.flush(timeout=30)
    print("\nWhat depends on the renamed field (`lineage-assets lineage impact orders.supplier`):")
    print(ask("impact", "orders.supplier", settings, log=emitter.log).tree())
    if run.held_back:
        print(
            "\nTo let it through: teach the pipeline the rename in lineage_assets/datasets.py,\n"
            '    ORDERS_READER_SCHEMA = with_aliases(ORDERS_AVRO_SCHEMA, supplier=("vendor",))\n'
            "then `lineage-assets dlq replay` and `lineage-assets demo --orders 0` (supplier_stats is rebuilt)."
        )
    return 0 if run.held_back and run.outstanding >= drifted else 1

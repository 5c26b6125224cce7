"""The main job: bring the stack up and materialize every asset in order on a bounded set of orders.

Runs go to the Dagster instance under the state folder (``DAGSTER_HOME``), so ``make dev`` shows
them afterwards.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections import Counter, defaultdict
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from decimal import Decimal

import dagster as dg

from lineage_assets.assets.common import asset_key
from lineage_assets.assets.design import published_line
from lineage_assets.assets.in_progress import lineage_runs_in_progress
from lineage_assets.assets.lakehouse import days_behind
from lineage_assets.datasets import (
    DATASETS,
    LAKEHOUSE_ORDERS,
    LINEAGE_CHECK,
    ORDERS,
    ORDERS_AVRO_SCHEMA,
    SUPPLIER_STATS,
)
from lineage_assets.dead_letters import TEACH_THEN_REPLAY
from lineage_assets.definitions import build_definitions, materializable, publish_definitions
from lineage_assets.generator import GeneratedOrder, GeneratorConfig, generate_orders, produce_orders
from lineage_assets.instance import prepare_dagster_home
from lineage_assets.lineage.check import (
    InProgress,
    check_log,
    check_marquez_with_design,
    log_design,
    log_notes,
    report,
    retire,
)
from lineage_assets.lineage.delivery import Backend
from lineage_assets.lineage.emitter import LineageEmitter, emitter_for
from lineage_assets.lineage.marquez import MarquezApi, MarquezError
from lineage_assets.lineage.queries import ask
from lineage_assets.preflight import require_services
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.settings import Settings
from lineage_assets.source_schemas import value_subject
from lineage_assets.stack.supervisor import Supervisor
from lineage_assets.streaming.exclusive import AlreadyRunning, demo_holder, exclusive_runs

STREAMING = tuple(d for d in DATASETS.values() if d.job.streaming)


@dataclass
class PipelineRun:
    """What one pass over the pipeline did, read back from the materializations' metadata."""

    rows: dict[str, int] = field(default_factory=dict)
    dead_letters: int = 0
    days: list[str] = field(default_factory=list)
    supplier_totals: dict[str, dict[str, tuple[Decimal, int]]] = field(
        default_factory=dict
    )  # day -> supplier -> (total, count)
    checks: dict[str, bool] = field(default_factory=dict)
    held_back: list[str] = field(
        default_factory=list
    )  # days supplier_stats waits on (schema_incompatible dead letters)
    outstanding: int = 0  # those dead letters, not replayed yet
    run_ids: list[str] = field(default_factory=list)  # the Dagster runs, in order


def _raise_failures(result: dg.ExecuteInJobResult) -> None:
    """Why the run was refused before any step ran (its resources not set up: another run of its
    streaming jobs, named); else its step failures, except a failed blocking asset check: that asset
    did materialize, and its check holds back what depends on it (the run reports it; the pipeline
    goes on)."""
    for event in result.all_events:
        if event.event_type == dg.DagsterEventType.RESOURCE_INIT_FAILURE:
            error = event.event_specific_data.error
            while error.cause is not None:  # Dagster's wrapper first, the resource's own error last
                error = error.cause
            refused = AlreadyRunning if error.cls_name == AlreadyRunning.__name__ else RuntimeError
            raise refused(error.message.strip().split(": ", 1)[-1])  # without the class's name before it
    for event in result.get_step_failure_events():
        error = event.step_failure_data.error
        if error is None or error.cls_name != "DagsterAssetCheckFailedError":
            raise RuntimeError(f"step {event.step_key} failed: {error.to_string() if error else 'no error recorded'}")


def dagster_instance(settings: Settings) -> dg.DagsterInstance:
    os.environ.setdefault("DAGSTER_HOME", str(prepare_dagster_home(settings)))
    return dg.DagsterInstance.get()


def _outcomes(result: dg.ExecuteInJobResult, definitions: dg.Definitions) -> dict[str, bool]:
    """Each check the run evaluated, passed or not, by its name; where several assets have a check of
    that name, by its name and asset ("lineage_matches_catalog of lakehouse/orders")."""
    names = Counter(key.name for key in definitions.resolve_asset_graph().asset_check_keys)
    return {
        c.check_name if names[c.check_name] == 1 else f"{c.check_name} of {c.asset_key.to_user_string()}": c.passed
        for c in result.get_asset_check_evaluations()
    }


def _metadata(result: dg.ExecuteInJobResult, dataset) -> dict:
    materializations = [m for m in result.asset_materializations_for_node(dataset.node_name)]
    return {key: value.value for key, value in materializations[-1].metadata.items()} if materializations else {}


DEMO_LATE_FRACTION, DEMO_BAD_FRACTION = 0.03, 0.04


def demo_claim(settings: Settings) -> AbstractContextManager[None]:
    """Every streaming job's lock, for the demo in this process: taken at once, all or none, before a
    pass does anything (a second demo started at the same instant stops there, naming this one); the
    catch-up runs the pass makes run under it."""
    return exclusive_runs(settings.state_dir, {d.job.name: d.key for d in STREAMING}, demo_holder())


def run_pipeline(
    environment: SettingsResource, instance: dg.DagsterInstance, orders_config: dict | None, log=print
) -> PipelineRun:
    """Generate orders (unless ``orders_config`` is None), run the streaming jobs, then
    ``supplier_stats`` for every day the ingestion touched, with all asset checks; under the demo's
    claim (``demo_claim``), refused before it produces an order while a streaming job runs elsewhere."""
    with demo_claim(environment.settings):
        definitions = build_definitions(environment)
        assets = [*materializable(definitions.assets), *materializable(definitions.asset_checks)]
        resources = definitions.resources
        run = PipelineRun()

        if orders_config is not None:
            log(f"orders: producing {orders_config.get('count', 'the default number of')} orders")
            result = dg.materialize(
                assets,
                instance=instance,
                selection=[asset_key(ORDERS)],
                resources=resources,
                run_config={"ops": {ORDERS.node_name: {"config": orders_config}}},
            )
            run.run_ids.append(result.run_id)
            run.rows[ORDERS.key] = _metadata(result, ORDERS)["rows_out"]

        log("streaming jobs (catch-up): " + ", ".join(d.key for d in STREAMING))
        result = dg.materialize(
            assets,
            instance=instance,
            selection=dg.AssetSelection.assets(*[asset_key(d) for d in STREAMING]),
            resources=resources,
            raise_on_error=False,
        )
        run.run_ids.append(result.run_id)
        _raise_failures(result)
        for dataset in STREAMING:
            run.rows[dataset.key] = _metadata(result, dataset)["rows_out"]
        ingestion = _metadata(result, LAKEHOUSE_ORDERS)
        run.dead_letters = ingestion["dead_letters"]
        run.days = days_behind(instance)  # this pass's days and any an earlier one left behind, without those held back
        run.held_back, run.outstanding = list(ingestion["days_held_back"]), ingestion["schema_incompatible_outstanding"]
        run.checks.update(_outcomes(result, definitions))
        if not run.checks.get(f"{LINEAGE_CHECK} of {LAKEHOUSE_ORDERS.key}", True):
            # Blocking: the daily totals must not be computed from a derivation nobody reviewed.
            log(f"supplier_stats: not computed, the lineage of {LAKEHOUSE_ORDERS.key} differs from its design")
            return run

        for day in run.days:
            log(f"supplier_stats: day {day}")
            result = dg.materialize(
                assets, instance=instance, selection=[asset_key(SUPPLIER_STATS)], partition_key=day, resources=resources
            )
            run.run_ids.append(result.run_id)
            run.checks.update(_outcomes(result, definitions))
            totals: dict[str, tuple[Decimal, int]] = defaultdict(lambda: (Decimal("0"), 0))
            for row in _metadata(result, SUPPLIER_STATS)["totals"]:
                total, count = totals[row["supplier"]]
                totals[row["supplier"]] = (total + Decimal(row["total_price"]), count + row["total_count"])
            run.supplier_totals[day] = dict(totals)
            run.rows.setdefault(SUPPLIER_STATS.key, 0)
            run.rows[SUPPLIER_STATS.key] += _metadata(result, SUPPLIER_STATS)["rows_out"]
        return run


def summary(run: PipelineRun, settings: Settings) -> str:
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
        lines.append(f"Supplier totals for {day} (from lakehouse/supplier_stats):")
        lines += [
            f"  {supplier:<8} {total:>12}  {count:>6} orders" for supplier, (total, count) in sorted(totals.items())
        ]
    if run.checks:
        lines.append(
            "Asset checks: " + ", ".join(f"{name} {'passed' if ok else 'FAILED'}" for name, ok in run.checks.items())
        )
    lines += [
        "",
        f"Next: the lineage in Marquez's UI on {settings.marquez_web_url} (search for supplier_stats);",
        f"      `make dev` opens the Dagster UI on {settings.dagster_url} with these runs;",
        "      `lineage-assets stack status` shows the servers; `make stack-down` stops them.",
    ]
    return "\n".join(lines)


def marquez_gaps(emitter: LineageEmitter, settings: Settings, in_progress: InProgress) -> list[str]:
    """The check of what Marquez shows (printed), when the lineage goes to Marquez and it answers."""
    if emitter.backend != Backend.marquez(settings.marquez_api_url):
        print("lineage check in Marquez skipped: openlineage-python's configuration sends the lineage elsewhere")
        return []
    api = MarquezApi(settings.marquez_api_url)
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
    with demo_claim(settings):  # before the stack is touched: a second demo stops here, in one line
        Supervisor(settings, progress=print).up()
        require_services(settings)  # the ones run elsewhere too, before an order is produced
        print(published_line(publish_definitions(settings)))  # Marquez shows the designed graph before any run
        # Some late and some bad orders, so the watermark and the dead-letter topic have work to show.
        instance = dagster_instance(settings)
        run = run_pipeline(
            SettingsResource.of(settings),
            instance,
            {"count": orders, "seed": seed, "late_fraction": DEMO_LATE_FRACTION, "bad_fraction": DEMO_BAD_FRACTION},
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
    with demo_claim(settings):  # before an order is produced: a second demo stops here, in one line
        Supervisor(settings, progress=print).up()
        require_services(settings)
        environment = SettingsResource.of(settings)
        instance = dagster_instance(settings)
        as_before = list(generate_orders(GeneratorConfig(count=good, seed=seed)))
        renamed = [as_drifted(order) for order in generate_orders(GeneratorConfig(count=drifted, seed=seed + 1))]
        address = (settings.kafka_servers, settings.schema_registry_url, settings.orders_topic)
        produce_orders(as_before, *address)
        produce_orders(renamed, *address, value_schema=json.dumps(DRIFTED_ORDERS_SCHEMA))
        print(
            f"produced {good} orders as before and {drifted} with `supplier` renamed `vendor` (a new version of "
            f"{value_subject(settings.orders_topic)})"
        )
        run = run_pipeline(environment, instance, None)
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

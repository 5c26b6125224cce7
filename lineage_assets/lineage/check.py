"""The lineage check: does the OpenLineage graph match the Dagster asset graph, and does the column
lineage each job observed in Spark's plan match what the catalog expects?

It reads lineage as data (the project's event log, or what Marquez's API shows) into one
``LineageGraph`` and compares it with the dataset catalog, which is the asset graph and the expected
column lineage. A gap is a readable line; no gap means the check passes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from lineage_assets.datasets import CHECKS, DATASETS, ORCHESTRATOR_JOB, Check, Dataset, retired_jobs
from lineage_assets.lineage import observed
from lineage_assets.lineage.design import PublishedDesign
from lineage_assets.lineage.event_log import EventLog
from lineage_assets.lineage.graph import TERMINAL, LineageGraph, Node, job_key
from lineage_assets.lineage.marquez import MarquezApi, lineage_nodes, read_graph
from lineage_assets.lineage.summary import summary
from lineage_assets.settings import Settings

# Lineage run id -> when its Dagster run started, for the runs of Dagster runs the instance says are in
# progress (``assets/in_progress.py``): such a run without its end is under way, not left RUNNING.
InProgress = Mapping[str, dt.datetime]


def _asset_job(dataset: Dataset, settings: Settings) -> str:
    return job_key(settings.lineage_namespace, dataset.job.lineage_name)


def _check_jobs(settings: Settings) -> dict[str, Check]:
    return {job_key(settings.lineage_namespace, check.lineage_name): check for check in CHECKS.values()}


def _retired_jobs(settings: Settings) -> dict[str, str]:
    return {job_key(settings.lineage_namespace, old): new for old, new in retired_jobs().items()}


def check(
    events: list[dict[str, Any]],
    settings: Settings,
    running_jobs: AbstractSet[str] = frozenset(),
    design: PublishedDesign | None = None,
    in_progress: InProgress | None = None,
) -> list[str]:
    """Every gap between the asset graph and the lineage in ``events`` (run events); empty when they agree.

    ``running_jobs`` are jobs known to be running now (streaming deployments), and ``in_progress`` runs
    known to be under way: those may lack a terminal event. With the published ``design``, a designed
    job that never ran is no gap (``not_yet_run`` names it), and the runs are also held against the design."""
    return check_graph(LineageGraph.from_events(events), settings, running_jobs, design, in_progress)


def check_marquez(
    api: MarquezApi,
    settings: Settings,
    running_jobs: AbstractSet[str] = frozenset(),
    design: PublishedDesign | None = None,
    graph: LineageGraph | None = None,
    in_progress: InProgress | None = None,
) -> list[str]:
    """``check`` of what Marquez shows: its jobs, runs and each asset's columns and column lineage as
    the newest version a run wrote keeps them (Marquez's column-lineage graph also keeps every field
    pair it was ever sent, so a derivation changed since lingers there; a version the design made
    holds what was declared, not what ran), plus its lineage graph (asset and check jobs only)
    one job out from every asset, and every dataset the project's jobs read or write there. One job
    out, not Marquez's whole walk: together they reach every job that touches an asset and every
    dataset such a job touches, and Marquez fetches each job's latest run with all its facets. Other datasets in
    the same namespaces (another team's topics on a shared cluster) are not the project's. ``graph``:
    Marquez's jobs and runs (``read_graph``) when the caller has read them."""
    graph = read_graph(api, settings) if graph is None else graph
    for dataset in DATASETS.values():
        node = dataset.identity(settings).node
        written = api.newest_written_version(*node)
        if written is None:
            continue
        writer = written["createdByRun"].get("jobVersion") or {}
        if writer:
            graph.schemas[node][job_key(writer["namespace"], writer["name"])] = {
                field["name"]: field.get("type") or "" for field in written.get("fields") or []
            }
        facets = written.get("facets") or {}
        if facet := facets.get("columnLineage"):
            graph.record_column_lineage((None, node), facet)
        elif unobserved := facets.get("columnLineageUnobserved"):
            graph.column_lineage.pop((None, node), None)
            graph.unobserved[(None, node)] = unobserved.get("reason") or "no reason given"
    gaps = check_graph(graph, settings, running_jobs, design, in_progress)
    retired = _retired_jobs(settings)
    for job in sorted(set(graph.jobs) & set(retired)):
        gaps.append(
            f"retired job: {job} (now {retired[job]}) is still shown in Marquez; "
            f"`lineage-assets lineage retire` hides it"
        )
    for job in sorted(set(graph.jobs) & {job_key(*job) for job in (design.retired if design else ())}):
        gaps.append(
            f"retired job: {job} (no longer in the definitions) is still shown in Marquez; "
            f"`lineage-assets lineage retire` hides it"
        )
    expected_jobs = {_asset_job(dataset, settings) for dataset in DATASETS.values()} | set(_check_jobs(settings))
    expected_datasets = {dataset.identity(settings).node for dataset in DATASETS.values()}
    for dataset in DATASETS.values():
        shown_jobs, shown_datasets = lineage_nodes(api, *dataset.identity(settings).node, depth=1)
        for extra in sorted(shown_jobs - expected_jobs - set(retired)):
            gaps.append(f"Marquez lineage of asset {dataset.key} has job {extra}, which is no asset's job")
        for namespace, name in sorted(shown_datasets - expected_datasets):
            gaps.append(f"Marquez lineage of asset {dataset.key} has dataset {namespace}:{name}, which is no asset")
    symlinks = {(s.namespace, s.name) for dataset in DATASETS.values() for s in dataset.identity(settings).symlinks}
    jobs = {*graph.jobs, *graph.inputs, *graph.outputs}
    touched = set().union(*(graph.current_inputs(job) | graph.current_outputs(job) for job in jobs))
    for namespace, name in sorted(touched - expected_datasets - symlinks):
        gaps.append(
            f"the project's jobs in Marquez touch dataset {namespace}:{name}, which is neither an "
            f"asset nor an asset's symlink"
        )
    return gaps


def _ran(graph: LineageGraph, job: str) -> bool:
    return job in graph.jobs and bool(graph.jobs[job].runs)


def check_graph(
    graph: LineageGraph,
    settings: Settings,
    running_jobs: AbstractSet[str] = frozenset(),
    design: PublishedDesign | None = None,
    in_progress: InProgress | None = None,
) -> list[str]:
    gaps = []
    asset_jobs = {_asset_job(dataset, settings): dataset for dataset in DATASETS.values()}
    for job, dataset in asset_jobs.items():
        if design is not None and job in design.jobs and not _ran(graph, job):
            continue  # designed, not yet run: nothing ran that could disagree
        node = dataset.identity(settings).node
        if node not in graph.current_outputs(job):
            gaps.append(f"missing edge: job {job} -> dataset {node[0]}:{node[1]} (asset {dataset.key})")
        upstream_nodes = {DATASETS[key].identity(settings).node for key in dataset.upstream}
        for upstream_key in dataset.upstream:
            upstream = DATASETS[upstream_key].identity(settings).node
            if upstream not in graph.current_inputs(job):
                gaps.append(f"missing edge: dataset {upstream[0]}:{upstream[1]} (asset {upstream_key}) -> job {job}")
        for extra in sorted(graph.current_inputs(job) - upstream_nodes):
            gaps.append(
                f"extra edge: job {job} reads {extra[0]}:{extra[1]}, which asset {dataset.key} does not depend on"
            )
        for extra in sorted(graph.current_outputs(job) - {node}):
            gaps.append(f"extra edge: job {job} writes {extra[0]}:{extra[1]}, which is not asset {dataset.key}")
        gaps.extend(_column_gaps(graph, dataset, node, job, settings))
    check_jobs = _check_jobs(settings)
    for job, asset_check in check_jobs.items():  # a check that ran reads what it checks (one designed only may not)
        checked = DATASETS[asset_check.dataset].identity(settings).node
        if _ran(graph, job) and checked not in graph.current_inputs(job):
            gaps.append(
                f"missing edge: dataset {checked[0]}:{checked[1]} (asset {asset_check.dataset}) -> check job {job}"
            )
        for extra in sorted(graph.current_inputs(job) - {checked}):
            gaps.append(
                f"extra edge: check job {job} reads {extra[0]}:{extra[1]}, which is not asset "
                f"{asset_check.dataset} it checks"
            )
        for extra in sorted(graph.current_outputs(job)):
            gaps.append(f"extra edge: check job {job} writes {extra[0]}:{extra[1]}; a check writes nothing")
    orchestrator = job_key(settings.lineage_namespace, ORCHESTRATOR_JOB)
    retired = _retired_jobs(settings)  # history of a renamed job (check_marquez says if Marquez still shows it)
    for job in sorted(set(graph.jobs) | set(graph.inputs) | set(graph.outputs)):
        if job in asset_jobs or job in check_jobs or job == orchestrator or job in retired:
            continue
        if graph.datasets_of(job):
            gaps.append(
                f"extra job: {job} reads or writes {len(graph.datasets_of(job))} datasets but is no asset's job"
            )
        elif (summary := graph.jobs.get(job)) is None or summary.parent not in {*asset_jobs, orchestrator}:
            gaps.append(f"stray job: {job} is neither an asset's job, the orchestrator's, nor nested under one")
    for (namespace, name, kind), nodes in sorted(graph.aliases.items()):
        if len(nodes) > 1:
            names = ", ".join(f"{n[0]}:{n[1]}" for n in sorted(nodes))
            gaps.append(f"duplicate dataset: {kind} {namespace}:{name} is named {len(nodes)} ways: {names}")
    known = {d.identity(settings).node for d in DATASETS.values()}
    used = sorted(
        {
            (job, node)
            for job in {*graph.jobs, *graph.inputs, *graph.outputs}
            for node in graph.current_inputs(job) | graph.current_outputs(job)
        }
    )
    for job, node in used:
        if node not in known and not any(node in aliased for aliased in graph.aliases.values() if known & aliased):
            gaps.append(f"orphan dataset: {node[0]}:{node[1]} (used by job {job}) is no asset of the graph")
    for run_id, states in graph.run_states.items():
        job = states[0][0]
        kinds = [state for _, state in states]
        terminal = [k for k in kinds if k in TERMINAL]
        if _unended(states) and job.split("/", 1)[1] not in running_jobs and run_id not in (in_progress or {}):
            gaps.append(f"run left RUNNING: {job} run {run_id} has no terminal event")
        if len(terminal) > 1 and len(set(terminal)) > 1:
            gaps.append(f"conflicting terminal events: {job} run {run_id}: {', '.join(terminal)}")
        if terminal and kinds[-1] not in TERMINAL:
            gaps.append(f"event after the end: {job} run {run_id} ends with {kinds[-1]} after {terminal[0]}")
    return gaps + (design_gaps(graph, design) if design is not None else [])


def _unended(states: list[tuple[str, str]]) -> bool:
    """Whether a run's states (``LineageGraph.run_states``) have its START and no terminal event."""
    kinds = {state for _, state in states}
    return "START" in kinds and not kinds & TERMINAL


def runs_in_progress(graph: LineageGraph, in_progress: InProgress, now: dt.datetime | None = None) -> list[str]:
    """The runs without their end that ``check_graph`` passes over as ``in_progress``, as notes with their age."""
    now = now or dt.datetime.now(dt.UTC)
    return [
        f"run in progress: {states[0][0]} run {run_id}, started {_age(now - in_progress[run_id])} ago"
        for run_id, states in graph.run_states.items()
        if run_id in in_progress and _unended(states)
    ]


def _age(elapsed: dt.timedelta) -> str:
    """``elapsed`` in its two largest units from the first that is not zero (``3h 12m``, ``45s``)."""
    rest, amounts = max(int(elapsed.total_seconds()), 0), []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        amounts.append(f"{rest // size}{unit}")
        rest %= size
    first = next((i for i, amount in enumerate(amounts) if not amount.startswith("0")), len(amounts) - 1)
    return " ".join(amounts[first : first + 2])


def design_gaps(graph: LineageGraph, design: PublishedDesign) -> list[str]:
    """What the runs did beside the published design: an edge of a designed job's runs the design
    lacks, and a dataset a designed job wrote with other columns than its published schema."""
    gaps = []
    for job, (inputs, outputs) in sorted(design.jobs.items()):
        if not _ran(graph, job):
            continue
        for extra in sorted(graph.current_inputs(job) - inputs):
            gaps.append(f"beside the design: job {job} ran reading {extra[0]}:{extra[1]}, which its design does not")
        for extra in sorted(graph.current_outputs(job) - outputs):
            gaps.append(f"beside the design: job {job} ran writing {extra[0]}:{extra[1]}, which its design does not")
        for node in sorted(outputs & graph.current_outputs(job)):
            written, published = graph.schemas.get(node, {}).get(job), design.schemas.get(node)
            if written is not None and published is not None and written != published:
                gaps.append(
                    f"beside the design: job {job} wrote {node[0]}:{node[1]} with columns "
                    f"{_columns(written)}, its published schema has {_columns(published)}"
                )
    return gaps


def _columns(columns: dict[str, str]) -> str:
    return "(" + ", ".join(f"{name} {kind}" for name, kind in columns.items()) + ")"


def not_yet_run(design: PublishedDesign, ran: set[str]) -> list[str]:
    """The designed jobs no run of which is known (``ran``: "namespace/name" of jobs that ran)."""
    return [f"not yet run: {job} (designed, published)" for job in sorted(set(design.jobs) - ran)]


def log_design(log: EventLog) -> PublishedDesign:
    """The design published through this log (empty when none was)."""
    return PublishedDesign.from_events(summary(log).design)


def log_notes(log: EventLog, in_progress: InProgress | None = None) -> list[str]:
    """The notes of the log's check: the designed jobs no run of which it holds, then its runs ``in_progress``."""
    known = summary(log)
    return not_yet_run(PublishedDesign.from_events(known.design), known.ran()) + runs_in_progress(
        known.graph, in_progress or {}
    )


def check_marquez_with_design(
    api: MarquezApi, settings: Settings, log: EventLog, in_progress: InProgress | None = None
) -> tuple[list[str], list[str]]:
    """What the command line and the demo check in Marquez: the events of ``log`` it lacks, ``check_marquez``
    against the design published through ``log``; and, as notes, the designed jobs it knows no run of and
    its runs ``in_progress``."""
    design = log_design(log)
    jobs = api.jobs(settings.lineage_namespace)  # once: Marquez builds the list from every run it holds
    graph = read_graph(api, settings, jobs)
    gaps = not_delivered(log) + check_marquez(
        api, settings, design=design if design.jobs else None, graph=graph, in_progress=in_progress
    )
    # A job published and never run has no ``latestRun``.
    ran = {job_key(job["namespace"], job["name"]) for job in jobs if job.get("latestRun")}
    return gaps, not_yet_run(design, ran) + runs_in_progress(graph, in_progress or {})


def _column_gaps(graph: LineageGraph, dataset: Dataset, node: Node, job: str, settings: Settings) -> list[str]:
    """The latest column lineage reported into ``node`` (what the job observed in Spark's plan) held
    against the catalog's expectation, per column and input field."""
    if not dataset.expected_lineage:
        return []
    hops = graph.lineage_into(job, node)
    if hops is None and (reason := graph.unobserved_into(job, node)) is not None:
        run = graph.column_runs.get((job, node))
        return [f"no observed column lineage: run {run} of {job} wrote {dataset.key} without it: {reason}"]
    if hops is None:
        return [f"no observed column lineage: no run of {job} reported where the columns of {dataset.key} come from"]
    keys = {d.identity(settings).node: d.key for d in DATASETS.values()}
    kinds: dict[str, observed.Kinds] = {}
    descriptions: dict[str, set[str]] = {}
    for (source, field, _, column), hop in hops.items():
        kinds.setdefault(column, {})[(keys.get(source, f"{source[0]}:{source[1]}"), field)] = hop.described_kinds
        descriptions.setdefault(column, set()).add(hop.description)
    merged = descriptions if any(hop.merged for hop in hops.values()) else None
    run = graph.column_runs.get((job, node))
    found = [str(gap) for gap in observed.gaps(dataset, kinds, run, merged)]
    # A column that reads no field itself (COUNT(*)): only its per-column description says what it is.
    texts, designed = graph.texts_into(job, node), dataset.designed
    reading_nothing = {c: text for c, text in designed.columns.items() if not designed.inputs[c]} if designed else {}
    for column, derivation in reading_nothing.items():  # the others: their inputs' transformations carry it
        shown = texts.get(column, "")
        if shown != derivation and not shown.startswith(f"{derivation}; "):
            rows = {how for *_, how in designed.rows} if designed else set()
            ran = "; ".join(part for part in shown.split("; ") if part not in rows) or "nothing"
            found.append(str(observed.Gap(dataset.key, column, None, derivation, ran, run)))
    return found


def retire(api: MarquezApi, settings: Settings, design: PublishedDesign | None = None) -> list[str]:
    """Hide in Marquez the jobs renamed since (``datasets.retired_jobs``) and those the published
    ``design`` retired; the names hidden ("namespace/name" for the design's). Marquez keeps their runs
    (each still found by its id) and shows a job again if an event of it arrives, so a retired job's
    event must be delivered before it is hidden."""
    hidden = []
    retiring = {(settings.lineage_namespace, name): name for name in retired_jobs()}
    if design is not None:
        retiring |= {job: job_key(*job) for job in design.retired}
    for namespace in sorted({namespace for namespace, _ in retiring}):
        shown = {job["name"] for job in api.jobs(namespace)}
        for name in sorted(name for ns, name in retiring if ns == namespace and name in shown):
            api.delete_job(namespace, name)
            hidden.append(retiring[(namespace, name)])
    return hidden


def check_log(log: EventLog, settings: Settings, in_progress: InProgress | None = None) -> list[str]:
    """``check`` of the log's run events against the asset graph and the design published in the same
    log, after a gap for each line of it that is no event."""
    known = summary(log)
    design = PublishedDesign.from_events(known.design) if known.design else None
    return [f"unreadable event at {line}" for line in known.unreadable] + check_graph(
        known.graph, settings, design=design, in_progress=in_progress
    )


def not_delivered(log: EventLog) -> list[str]:
    """Events of the log the backend does not have: waiting, or set aside as dead letters. While there
    are any, what Marquez shows is not the whole lineage, whatever else it matches."""
    found = []
    if waiting := log.pending():
        found.append(f"{waiting} events of {log.segments_dir} wait for delivery (`lineage-assets lineage status`)")
    if dead := len(log.dead_letters()):
        found.append(
            f"{dead} events were set aside in {log.dead_letters_path} and never delivered "
            "(`lineage-assets lineage dead-letters`)"
        )
    return found


def report(gaps: list[str], where: str, notes: Sequence[str] = ()) -> str:
    """The check's result as printed: one line when ``where`` matches the asset graph, else a line per
    gap; then the ``notes`` (designed jobs not yet run, runs in progress), which are no gaps."""
    if not gaps:
        lines = [f"lineage check: {where} matches the asset graph"]
    else:
        lines = [f"lineage check: {len(gaps)} gaps between the asset graph and {where}:", *(f"  - {g}" for g in gaps)]
    return "\n".join([*lines, *(f"  note: {note}" for note in notes)])

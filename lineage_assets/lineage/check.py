"""The lineage check: does the OpenLineage graph match the Dagster asset graph?

It reads lineage as data (a list of OpenLineage events: the project's event log, or what a backend
returns) and compares it with the dataset catalog, which is the asset graph. A gap is a readable
line; no gap means the check passes.
"""

from __future__ import annotations

from lineage_assets.catalog import DATASETS, Dataset
from lineage_assets.lineage.graph import TERMINAL, LineageGraph
from lineage_assets.settings import Settings


def _node(dataset: Dataset, settings: Settings) -> tuple[str, str]:
    identity = dataset.identity(settings)
    return identity.namespace, identity.name


def check(events: list[dict], settings: Settings, running_jobs: set[str] = frozenset()) -> list[str]:
    """Every gap between the asset graph and the lineage in ``events``; empty when they agree.

    ``running_jobs`` are jobs known to be running now (streaming deployments): their runs may lack
    a terminal event."""
    graph = LineageGraph.from_events(events)
    gaps = []
    for dataset in DATASETS.values():
        job = f"{settings.lineage_namespace}/{dataset.job.name}"
        node = _node(dataset, settings)
        if node not in graph.outputs.get(job, set()):
            gaps.append(f"missing edge: job {job} -> dataset {node[0]}:{node[1]} (asset {dataset.key})")
        for upstream_key in dataset.upstream:
            upstream = _node(DATASETS[upstream_key], settings)
            if upstream not in graph.inputs.get(job, set()):
                gaps.append(f"missing edge: dataset {upstream[0]}:{upstream[1]} (asset {upstream_key}) -> job {job}")
        for column, sources in dataset.column_lineage.items():
            for source in sources:
                edge = (_node(DATASETS[source.dataset], settings), source.column, node, column)
                if edge not in graph.column_edges:
                    gaps.append(f"missing column edge: {source.dataset}.{source.column} -> {dataset.key}.{column}")
    for (namespace, name, kind), nodes in sorted(graph.aliases.items()):
        if len(nodes) > 1:
            names = ", ".join(f"{n[0]}:{n[1]}" for n in sorted(nodes))
            gaps.append(f"duplicate dataset: {kind} {namespace}:{name} is named {len(nodes)} ways: {names}")
    known = {_node(d, settings) for d in DATASETS.values()}
    used = sorted({(job, node) for side in (graph.inputs, graph.outputs) for job, nodes in side.items() for node in nodes})
    for job, node in used:
        if node not in known and not any(node in aliased for aliased in graph.aliases.values() if known & aliased):
            gaps.append(f"orphan dataset: {node[0]}:{node[1]} (used by job {job}) is no asset of the graph")
    for run_id, states in graph.run_states.items():
        job = states[0][0]
        kinds = [state for _, state in states]
        terminal = [k for k in kinds if k in TERMINAL]
        if "START" in kinds and not terminal and job.split("/", 1)[1] not in running_jobs:
            gaps.append(f"run left RUNNING: {job} run {run_id} has no terminal event")
        if len(terminal) > 1 and len(set(terminal)) > 1:
            gaps.append(f"conflicting terminal events: {job} run {run_id}: {', '.join(terminal)}")
        if terminal and kinds[-1] not in TERMINAL:
            gaps.append(f"event after the end: {job} run {run_id} ends with {kinds[-1]} after {terminal[0]}")
    return gaps

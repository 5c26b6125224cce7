"""Ask the lineage: what a dataset or column feeds (impact) and where a column comes from (trace).

Both walk one ``LineageGraph``, read from the project's event log or from Marquez's API, so either
source gives the same answer. Datasets are named by their Dagster asset key (or
``namespace:name``), as the catalog names them. A hop's transformation is that input field's own as
the events carry it; Marquez 0.51 keeps only the column's merged one, and an answer read from it says so.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from openlineage.client.event_v2 import RunState
from openlineage.client.serde import Serde
from openlineage.client.uuid import generate_new_uuid

from lineage_assets.datasets import CHECKS, DATASETS, Dataset
from lineage_assets.lineage import events
from lineage_assets.lineage.event_log import EventLog
from lineage_assets.lineage.graph import LineageGraph, Node, job_key
from lineage_assets.lineage.marquez import MarquezApi, read_graph
from lineage_assets.lineage.observed import as_designed
from lineage_assets.lineage.run_facts import DagsterRun, RunFacts
from lineage_assets.lineage.summary import summary
from lineage_assets.settings import Settings


class QueryError(ValueError):
    """The subject of a query names no dataset or column of the asset graph; the message lists those that exist."""


@dataclass(frozen=True)
class Subject:
    dataset: Dataset
    column: str | None


@dataclass(frozen=True)
class LatestRun:
    id: str
    state: str  # COMPLETE, FAIL, ABORT, or RUNNING while it has not ended
    time: str | None  # ISO 8601, UTC: when it ended, or started while it runs


@dataclass(frozen=True)
class Hop:
    upstream: str  # "dataset.column", the dataset by its asset key (namespace:name if it is no asset)
    downstream: str
    transformation: str  # e.g. DIRECT/AGGREGATION
    description: str  # e.g. SUM(price)
    job: str | None  # the job ("namespace/name") that writes the downstream dataset from the upstream one
    latest_run: LatestRun | None  # that job's latest run
    merged: bool = (
        False  # the transformation is the downstream column's over all its inputs (Marquez 0.51 keeps no other)
    )

    @property
    def indirect_only(self) -> bool:
        """The upstream column only decides which rows or groups there are (a filter, grouping, join or
        sort), none of the downstream column's values."""
        return all(kind.strip().startswith("INDIRECT") for kind in self.transformation.split(","))


@dataclass(frozen=True)
class DatasetRef:
    asset_key: str | None
    namespace: str
    name: str

    @property
    def label(self) -> str:
        return self.asset_key or f"{self.namespace}:{self.name}"


@dataclass(frozen=True)
class Answer:
    query: str  # impact or trace
    dataset: str  # the subject, by its asset key
    column: str | None  # None: every column of the dataset
    hops: tuple[Hop, ...]
    datasets: tuple[DatasetRef, ...]  # reached, the subject's own excluded
    jobs: tuple[str, ...]
    assets: tuple[str, ...]  # the Dagster asset keys among the datasets
    checks: tuple[str, ...] = ()  # impact: the asset checks that test a column reached (any, for a dataset)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def tree(self, reached: bool = True, indirect: bool = False) -> str:
        """The answer as printed: the subject, each hop indented under the column it leads from
        (impact) or to (trace), then (``reached``) the datasets, jobs and assets reached, and the
        asset checks that test them (impact). Hops with INDIRECT transformations only are counted on
        one line under their column unless ``indirect``: a column a filter reads reaches every column
        of the table, which would bury the few its values flow into."""
        near, far = ("upstream", "downstream") if self.query == "impact" else ("downstream", "upstream")
        children: dict[str, list[Hop]] = defaultdict(list)
        for hop in self.hops:
            children[getattr(hop, near)].append(hop)
        subject = f"{self.dataset}.{self.column}" if self.column else self.dataset
        lines = [f"{self.query} of {subject}" + ("" if self.hops else ": no column lineage")]

        def walk(entries: list[tuple[str, str | None]], prefix: str, path: frozenset[str]) -> None:
            for index, (text, column) in enumerate(entries):
                last = index == len(entries) - 1
                lines.append(f"{prefix}{'└── ' if last else '├── '}{text}")
                if column is not None and column not in path:  # a cycle is shown once
                    walk(branches(column), prefix + ("    " if last else "│   "), path | {column})

        def branches(column: str) -> list[tuple[str, str | None]]:
            shown = [hop for hop in children[column] if indirect or not hop.indirect_only]
            entries: list[tuple[str, str | None]] = [
                (_hop_line(hop, getattr(hop, far)), getattr(hop, far)) for hop in shown
            ]
            if folded := len(children[column]) - len(shown):
                how = "it reaches" if self.query == "impact" else "read"
                entries.append((f"… and {folded} more {how} only through INDIRECT edges (`--all` lists them)", None))
            return entries

        if self.column:
            walk(branches(subject), "", frozenset({subject}))
        else:
            walk([(column, column) for column in sorted(children) if column.startswith(f"{subject}.")], "", frozenset())
        if reached:
            lines.append(f"datasets: {', '.join(f'{d.label} ({d.namespace}:{d.name})' for d in self.datasets) or '-'}")
            lines.append(f"jobs: {', '.join(self.jobs) or '-'}")
            lines.append(f"Dagster assets: {', '.join(self.assets) or '-'}")
        if self.query == "impact" and (reached or self.checks):
            lines.append(f"asset checks: {', '.join(self.checks) or '-'}")
        return "\n".join(lines)


def _hop_line(hop: Hop, column: str) -> str:
    merged = " [the column's, over all its inputs: Marquez keeps no per-input one]" if hop.merged else ""
    line = f"{column}  ({hop.transformation}: {hop.description}){merged}"
    if hop.job:
        line += f"  job {hop.job.split('/', 1)[1]}"
    if hop.latest_run:
        line += f", latest run {hop.latest_run.id} {hop.latest_run.state} {hop.latest_run.time or ''}".rstrip()
    return line


def resolve(text: str, settings: Settings) -> Subject:
    """``DATASET[.COLUMN]``, the dataset by its asset key or its OpenLineage ``namespace:name``."""
    names: dict[str, Dataset] = {}
    for dataset in DATASETS.values():
        identity = dataset.identity(settings)
        names[dataset.key] = names[f"{identity.namespace}:{identity.name}"] = dataset
    # The longest name that the text is, or starts with before a dot: names hold dots and colons too.
    name = max((n for n in names if text == n or text.startswith(f"{n}.")), key=len, default=None)
    if name is None:
        known = ", ".join(
            f"{d.key} ({d.identity(settings).namespace}:{d.identity(settings).name})" for d in DATASETS.values()
        )
        raise QueryError(f"unknown dataset {text!r}: the datasets are {known}")
    dataset, column = names[name], text[len(name) + 1 :] or None
    if column is not None and column not in {c.name for c in dataset.columns}:
        raise QueryError(
            f"unknown column {column!r} of {dataset.key}: its columns are {', '.join(c.name for c in dataset.columns)}"
        )
    return Subject(dataset, column)


def impact(graph: LineageGraph, subject: Subject, settings: Settings) -> Answer:
    """Everything downstream of a dataset (every column of it) or of one column, and the asset
    checks (those the lineage has a run of) that test what is reached."""
    node = subject.dataset.identity(settings).node
    starts = [subject.column] if subject.column else [c.name for c in subject.dataset.columns]
    hops, columns = _walk(graph, [(node, column) for column in starts], downstream=True, settings=settings)
    reached = {node for node, _ in columns}
    jobs = {hop.job for hop in hops if hop.job}
    if subject.column is None:  # the dataset's readers, also those that take no column of it
        queue = [node]
        while queue:
            current = queue.pop()
            for job in sorted(j for j, read in graph.inputs.items() if current in read):
                jobs.add(job)
                queue.extend(graph.outputs.get(job, set()) - reached)
                reached |= graph.outputs.get(job, set())
    checks = set()
    for check in CHECKS.values():
        checked = DATASETS[check.dataset].identity(settings).node
        if checked in graph.inputs.get(job_key(settings.lineage_namespace, check.lineage_name), ()) and (
            checked in reached if subject.column is None else any((checked, c) in columns for c in check.columns)
        ):
            checks.add(check.name)
    return dataclasses.replace(_answer("impact", subject, hops, reached, jobs, settings), checks=tuple(sorted(checks)))


def trace(graph: LineageGraph, subject: Subject, settings: Settings) -> Answer:
    """Everything upstream of one column, down to the source topic's fields."""
    if subject.column is None:
        raise QueryError(
            f"trace needs a column, {subject.dataset.key}.COLUMN: its columns are "
            f"{', '.join(c.name for c in subject.dataset.columns)}"
        )
    hops, columns = _walk(
        graph, [(subject.dataset.identity(settings).node, subject.column)], downstream=False, settings=settings
    )
    return _answer(
        "trace", subject, hops, {node for node, _ in columns}, {hop.job for hop in hops if hop.job}, settings
    )


QUERIES: dict[str, Callable[[LineageGraph, Subject, Settings], Answer]] = {"impact": impact, "trace": trace}


def ask(
    query: str, text: str, settings: Settings, *, log: EventLog | None = None, marquez: MarquezApi | None = None
) -> Answer:
    """``impact`` or ``trace`` of ``text`` over the events of ``log``, or over what ``marquez`` shows."""
    subject = resolve(text, settings)
    if marquez is not None:
        graph = read_graph(marquez, settings)
    else:
        graph = summary(log).graph if log is not None else LineageGraph()
    return QUERIES[query](graph, subject, settings)


def declared_graph(settings: Settings) -> LineageGraph:
    """The lineage the catalog declares (the asset graph and its checks), as one run of each job
    would record it, less those runs: what the queries answer before any run."""
    declared_run = DagsterRun(run_id="declared", job_name="declared", started_at=dt.datetime.now(dt.UTC))
    graph = LineageGraph.from_events(
        [
            *(
                Serde.to_dict(
                    events.asset_event(
                        RunState.COMPLETE,
                        dataset,
                        None,
                        settings,
                        RunFacts(observation=as_designed(dataset)),
                        run_id=str(generate_new_uuid()),
                    )
                )
                for dataset in DATASETS.values()
            ),
            *(
                Serde.to_dict(events.check_event(RunState.COMPLETE, check, declared_run, settings))
                for check in CHECKS.values()
            ),
        ]
    )
    return dataclasses.replace(graph, jobs={}, run_states=defaultdict(list))


def declared_impact(dataset: Dataset, settings: Settings, graph: LineageGraph | None = None) -> str:
    """What depends on each column of ``dataset``, as the catalog declares it (the asset's page in the
    Dagster UI shows it), then the assets reached; empty when nothing does."""
    graph = graph or declared_graph(settings)
    answers = [impact(graph, Subject(dataset, column.name), settings) for column in dataset.columns]
    trees = [answer.tree(reached=False) for answer in answers if answer.hops]
    if not trees:
        return ""
    whole = impact(graph, Subject(dataset, None), settings)
    return "\n\n".join(trees) + (
        f"\n\nDagster assets downstream: {', '.join(whole.assets) or '-'}"
        f"\nAsset checks of it and downstream: {', '.join(whole.checks) or '-'}"
    )


def _asset_keys(settings: Settings) -> dict[Node, str]:
    return {dataset.identity(settings).node: dataset.key for dataset in DATASETS.values()}


def _walk(
    graph: LineageGraph, starts: list[tuple[Node, str]], downstream: bool, settings: Settings
) -> tuple[tuple[Hop, ...], set[tuple[Node, str]]]:
    """The column hops reachable from ``starts`` along the column edges in one direction, and the
    columns they reach (``starts`` among them)."""
    keys = _asset_keys(settings)

    def label(node: Node, column: str) -> str:
        return f"{keys.get(node) or f'{node[0]}:{node[1]}'}.{column}"

    column_hops = graph.column_hops  # built once: the graph keeps them per writer and dataset
    hops, seen, queue = set(), set(starts), list(starts)
    while queue:
        here = queue.pop()
        for edge, hop in column_hops.items():
            source, target = (edge[0], edge[1]), (edge[2], edge[3])
            if (source if downstream else target) != here:
                continue
            writers = sorted(
                j
                for j, written in graph.outputs.items()
                if target[0] in written and source[0] in graph.inputs.get(j, ())
            )
            for job in writers if writers else [None]:
                hops.add(
                    Hop(
                        label(*source),
                        label(*target),
                        hop.spelled,
                        hop.description,
                        job,
                        _latest_run(graph, job),
                        hop.merged,
                    )
                )
            there = target if downstream else source
            if there not in seen:
                seen.add(there)
                queue.append(there)
    return tuple(sorted(hops, key=lambda h: (h.upstream, h.downstream, h.job or ""))), seen


def _latest_run(graph: LineageGraph, job: str | None) -> LatestRun | None:
    summary = graph.jobs.get(job) if job else None
    if summary is None or not summary.latest_run:
        return None
    time = summary.latest_run_time
    return LatestRun(summary.latest_run, summary.state, time.astimezone(dt.UTC).isoformat() if time else None)


def _answer(
    query: str, subject: Subject, hops: tuple[Hop, ...], reached: set[Node], jobs: set[str], settings: Settings
) -> Answer:
    keys = _asset_keys(settings)
    datasets = tuple(
        DatasetRef(keys.get(node), *node) for node in sorted(reached - {subject.dataset.identity(settings).node})
    )
    return Answer(
        query,
        subject.dataset.key,
        subject.column,
        hops,
        datasets,
        tuple(sorted(jobs)),
        tuple(sorted(d.asset_key for d in datasets if d.asset_key)),
    )

"""Lineage as data: OpenLineage events read into one graph of jobs, datasets, columns and runs.

The lineage check and the lineage page both read events through this, so what one checks is what
the other shows.
"""

from __future__ import annotations

import datetime as dt
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

TERMINAL = {"COMPLETE", "FAIL", "ABORT"}

Node = tuple[str, str]  # a dataset's (namespace, name)
Edge = tuple[Node, str, Node, str]  # (input dataset, field, output dataset, column)


@dataclass(frozen=True)
class ColumnHop:
    """How one input field reaches one output column: its transformations ((type, subtype) each) and
    their description. ``merged``: the column's transformations over all its inputs, not this input's
    own (all that Marquez 0.51 keeps of a hop, and all an event without per-input ones says)."""

    kinds: frozenset[tuple[str, str]]
    description: str
    merged: bool = False
    own: frozenset[tuple[str, str, str]] = frozenset()  # its own transformations, each with its description

    @property
    def described_kinds(self) -> set[tuple[str, str, str]]:
        """Its kinds, each with its description (``observed.Kinds``); merged ones without."""
        return set(self.own) if self.own else {(kind, subtype, "") for kind, subtype in self.kinds}

    @property
    def spelled(self) -> str:
        return ", ".join(
            "IDENTITY" if kind == ("DIRECT", "IDENTITY") else f"{kind[0]}/{kind[1]}" for kind in sorted(self.kinds)
        )


def parse_kinds(merged: str | None) -> frozenset[tuple[str, str]]:
    """A facet's deprecated per-column ``transformationType`` ("IDENTITY", "DIRECT/AGGREGATION, ...")."""
    kinds: set[tuple[str, str]] = set()
    for part in (merged or "").split(","):
        part = part.strip()
        if part == "IDENTITY":
            kinds.add(("DIRECT", "IDENTITY"))
        elif part:
            kind, _, subtype = part.partition("/")
            kinds.add((kind, subtype))
    return frozenset(kinds)


def job_key(namespace: str, name: str) -> str:
    """A job in the graph: ``namespace/name``."""
    return f"{namespace}/{name}"


@dataclass
class JobSummary:
    """What the events say of one job: its type and the state of its latest run."""

    name: str  # "namespace/name"
    processing_type: str = ""
    integration: str = ""
    job_type: str = ""
    latest_run: str = ""
    latest_time: dt.datetime | None = None
    latest_started: dt.datetime | None = None  # the latest run's START
    latest_state: str = ""
    runs: set[str] = field(default_factory=set)
    parent: str | None = None  # the job of the latest run's parent run

    @property
    def short_name(self) -> str:
        return self.name.split("/", 1)[1]

    def record(self, event: dict[str, Any]) -> None:
        run_id, state = event["run"]["runId"], event.get("eventType", "OTHER")
        time = dt.datetime.fromisoformat(event["eventTime"])  # producers differ in precision and zone spelling
        self.runs.add(run_id)
        job_type = ((event.get("job") or {}).get("facets") or {}).get("jobType") or {}
        self.processing_type = job_type.get("processingType", self.processing_type)
        self.integration = job_type.get("integration", self.integration)
        self.job_type = job_type.get("jobType", self.job_type)
        if self.latest_time and time < self.latest_time:
            return
        parent = ((event["run"].get("facets") or {}).get("parent") or {}).get("job")
        if run_id != self.latest_run:
            self.latest_run, self.latest_state, self.latest_started = run_id, "", None
        self.latest_time = time
        if state == "START":
            self.latest_started = time
        # Once a run has ended, a later RUNNING (late delivery) does not revive it.
        if self.latest_state not in TERMINAL or state in TERMINAL:
            self.latest_state = state
        if parent:
            self.parent = job_key(parent["namespace"], parent["name"])

    @property
    def state(self) -> str:
        """COMPLETE, FAIL or ABORT when the latest run ended; RUNNING while it has not."""
        return self.latest_state if self.latest_state in TERMINAL else "RUNNING"

    @property
    def latest_run_time(self) -> dt.datetime | None:
        """When the latest run ended, or started while it runs (what Marquez keeps of a run: no
        RUNNING event's time)."""
        return self.latest_time if self.state in TERMINAL else self.latest_started


def column_hops(node: Node, facet: dict[str, Any]) -> dict[Edge, ColumnHop]:
    """A ``columnLineage`` facet of ``node``: each input's own transformations, or the column's merged
    ones where the input has none."""
    hops = {}
    for column, lineage in (facet.get("fields") or {}).items():
        for source in lineage.get("inputFields", []):
            edge = ((source["namespace"], source["name"]), source["field"], node, column)
            own = source.get("transformations") or []
            if own:
                hops[edge] = ColumnHop(
                    frozenset((t["type"], t.get("subtype") or "") for t in own),
                    "; ".join(dict.fromkeys(t["description"] for t in own if t.get("description"))),
                    own=frozenset((t["type"], t.get("subtype") or "", t.get("description") or "") for t in own),
                )
            else:
                hops[edge] = ColumnHop(
                    parse_kinds(lineage.get("transformationType")),
                    lineage.get("transformationDescription") or "",
                    merged=True,
                )
    return hops


@dataclass
class CurrentRun:
    """A job's latest run and what it read and wrote."""

    run_id: str
    inputs: set[Node] = field(default_factory=set)
    outputs: set[Node] = field(default_factory=set)


@dataclass
class LineageGraph:
    """What the events say: job -> inputs/outputs, column edges, dataset aliases and fields, runs."""

    inputs: dict[str, set[Node]] = field(default_factory=lambda: defaultdict(set))
    outputs: dict[str, set[Node]] = field(default_factory=lambda: defaultdict(set))
    # Per writer (None: not known, as in Marquez's column graph) and output dataset, the column lineage
    # of its latest report, and the run that reported it: what ran last.
    column_lineage: dict[tuple[str | None, Node], dict[Edge, ColumnHop]] = field(default_factory=dict)
    column_runs: dict[tuple[str | None, Node], str] = field(default_factory=dict)
    # Per column of the latest report, its per-column description: its own derivation first.
    column_texts: dict[tuple[str | None, Node], dict[str, str]] = field(default_factory=dict)
    # Where the latest report of a write said its column lineage could not be observed, and why.
    unobserved: dict[tuple[str | None, Node], str] = field(default_factory=dict)
    aliases: dict[tuple[str, str, str], set[Node]] = field(default_factory=lambda: defaultdict(set))
    schemas: dict[Node, dict[str, dict[str, str]]] = field(
        default_factory=lambda: defaultdict(dict)
    )  # job -> column -> type
    run_states: dict[str, list[tuple[str, str]]] = field(
        default_factory=lambda: defaultdict(list)
    )  # run -> [(job, state)]
    jobs: dict[str, JobSummary] = field(default_factory=dict)
    # Per job, its latest run and what that run read and wrote: the graph as it stands now, where
    # ``inputs`` and ``outputs`` keep what every run did.
    current: dict[str, CurrentRun] = field(default_factory=dict)

    @classmethod
    def from_events(cls, events: list[dict[str, Any]]) -> LineageGraph:
        graph = cls()
        for event in events:
            graph.add(event)
        return graph

    def add(self, event: dict[str, Any]) -> None:
        """What one more run event says (events are added in the order they were recorded)."""
        job = sys.intern(job_key(event["job"]["namespace"], event["job"]["name"]))  # one string, kept once
        state = (job, event.get("eventType", "OTHER"))
        states = self.run_states[event["run"]["runId"]]
        if not states or states[-1] != state:  # a deployment's thousands of RUNNING in a row say one thing
            states.append(state)
        summary = self.jobs.setdefault(job, JobSummary(job))
        summary.record(event)
        run_id = event["run"]["runId"]
        if summary.latest_run == run_id and (job not in self.current or self.current[job].run_id != run_id):
            self.current[job] = CurrentRun(run_id)
        for side, target in (("inputs", self.inputs), ("outputs", self.outputs)):
            for dataset in event.get(side) or []:
                self._add_dataset(job, target, dataset, run_id if side == "outputs" else None)
                if summary.latest_run == run_id:
                    getattr(self.current[job], side).add((dataset["namespace"], dataset["name"]))

    @property
    def column_hops(self) -> dict[Edge, ColumnHop]:
        return {edge: hop for hops in self.column_lineage.values() for edge, hop in hops.items()}

    @property
    def column_edges(self) -> set[Edge]:
        return set(self.column_hops)

    def lineage_into(self, job: str, node: Node) -> dict[Edge, ColumnHop] | None:
        """The column lineage of the latest report of ``job`` (or of the source, which shows no writer)
        into ``node``: None when that report said it could not be observed, never an earlier one's."""
        for key in ((job, node), (None, node)):
            if key in self.unobserved:
                return None
            if key in self.column_lineage:
                return self.column_lineage[key]
        return None

    def record_column_lineage(self, key: tuple[str | None, Node], facet: dict[str, Any]) -> None:
        """A report's ``columnLineage`` facet of a write, which replaces the earlier one."""
        self.column_lineage[key] = column_hops(key[1], facet)
        self.column_texts[key] = {
            column: fields.get("transformationDescription") or ""
            for column, fields in (facet.get("fields") or {}).items()
        }

    def texts_into(self, job: str, node: Node) -> dict[str, str]:
        """The per-column descriptions of the latest report into ``node`` (``lineage_into``)."""
        return self.column_texts.get((job, node), self.column_texts.get((None, node), {}))

    def unobserved_into(self, job: str, node: Node) -> str | None:
        """Why the latest report of ``job`` into ``node`` has no column lineage, when it said why."""
        return self.unobserved.get((job, node), self.unobserved.get((None, node)))

    def _add_dataset(self, job: str, side: dict[str, set[Node]], dataset: dict[str, Any], run_id: str | None) -> None:
        node = (dataset["namespace"], dataset["name"])
        side[job].add(node)
        facets = dataset.get("facets") or {}
        for identifier in (facets.get("symlinks") or {}).get("identifiers", []):
            self.aliases[(identifier["namespace"], identifier["name"], identifier["type"])].add(node)
        if "schema" in facets:
            self.schemas[node][job] = {
                column["name"]: column.get("type", "") for column in facets["schema"].get("fields", [])
            }
        if run_id is not None and "columnLineage" in facets:  # a later report replaces the job's earlier one
            self.record_column_lineage((job, node), facets["columnLineage"])
            self.column_runs[(job, node)] = run_id
            self.unobserved.pop((job, node), None)
        elif run_id is not None and "columnLineageUnobserved" in facets:
            self.column_lineage.pop((job, node), None)
            self.column_runs[(job, node)] = run_id
            self.unobserved[(job, node)] = facets["columnLineageUnobserved"].get("reason") or "no reason given"

    def columns(self, node: Node, trusted: set[str]) -> dict[str, str]:
        """A dataset's columns as the ``trusted`` jobs last reported them (others only when none did:
        a Spark job that reads a table's metadata reports that schema under the table's name)."""
        reports = self.schemas.get(node, {})
        chosen = [fields for job, fields in reports.items() if job in trusted] or list(reports.values())
        return {name: kind for fields in chosen for name, kind in fields.items()}

    def current_inputs(self, job: str) -> set[Node]:
        """What the latest run of ``job`` read (all its runs', where the source keeps one version of each
        job, as Marquez's job list does)."""
        return self.current[job].inputs if job in self.current else self.inputs.get(job, set())

    def current_outputs(self, job: str) -> set[Node]:
        """What the latest run of ``job`` wrote (``current_inputs``)."""
        return self.current[job].outputs if job in self.current else self.outputs.get(job, set())

    def datasets_of(self, job: str) -> set[Node]:
        return self.inputs.get(job, set()) | self.outputs.get(job, set())

    def owner_of(self, job: str) -> str | None:
        """The nearest ancestor job that reads or writes datasets itself (for a Spark job under an
        asset run, the asset's job); None for a job with no such ancestor."""
        seen = {job}
        parent = self.jobs[job].parent
        while parent and parent in self.jobs and parent not in seen:
            if self.datasets_of(parent):
                return parent
            seen.add(parent)
            parent = self.jobs[parent].parent
        return None

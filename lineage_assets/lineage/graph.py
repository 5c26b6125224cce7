"""Lineage as data: OpenLineage events read into one graph of jobs, datasets, columns and runs.

The lineage check and the lineage page both read events through this, so what one checks is what
the other shows.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass, field

TERMINAL = {"COMPLETE", "FAIL", "ABORT"}

Node = tuple[str, str]  # a dataset's (namespace, name)


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

    def record(self, event: dict) -> None:
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


@dataclass
class LineageGraph:
    """What the events say: job -> inputs/outputs, column edges, dataset aliases and fields, runs."""

    inputs: dict[str, set[Node]] = field(default_factory=lambda: defaultdict(set))
    outputs: dict[str, set[Node]] = field(default_factory=lambda: defaultdict(set))
    column_edges: set[tuple[Node, str, Node, str]] = field(default_factory=set)
    column_transformations: dict[tuple[Node, str, Node, str], str | None] = field(default_factory=dict)  # edge -> type
    column_descriptions: dict[tuple[Node, str, Node, str], str | None] = field(default_factory=dict)  # edge -> description
    aliases: dict[tuple[str, str, str], set[Node]] = field(default_factory=lambda: defaultdict(set))
    schemas: dict[Node, dict[str, dict[str, str]]] = field(default_factory=lambda: defaultdict(dict))  # job -> column -> type
    run_states: dict[str, list[tuple[str, str]]] = field(default_factory=lambda: defaultdict(list))  # run -> [(job, state)]
    jobs: dict[str, JobSummary] = field(default_factory=dict)

    @classmethod
    def from_events(cls, events: list[dict]) -> LineageGraph:
        graph = cls()
        for event in events:
            job = job_key(event["job"]["namespace"], event["job"]["name"])
            graph.run_states[event["run"]["runId"]].append((job, event.get("eventType", "OTHER")))
            graph.jobs.setdefault(job, JobSummary(job)).record(event)
            for side, target in (("inputs", graph.inputs), ("outputs", graph.outputs)):
                for dataset in event.get(side) or []:
                    graph._add_dataset(job, target, dataset)
        return graph

    def _add_dataset(self, job: str, side: dict[str, set[Node]], dataset: dict) -> None:
        node = (dataset["namespace"], dataset["name"])
        side[job].add(node)
        facets = dataset.get("facets") or {}
        for identifier in (facets.get("symlinks") or {}).get("identifiers", []):
            self.aliases[(identifier["namespace"], identifier["name"], identifier["type"])].add(node)
        if "schema" in facets:
            self.schemas[node][job] = {column["name"]: column.get("type", "") for column in facets["schema"].get("fields", [])}
        for column, lineage in ((facets.get("columnLineage") or {}).get("fields") or {}).items():
            for source in lineage.get("inputFields", []):
                edge = ((source["namespace"], source["name"]), source["field"], node, column)
                self.column_edges.add(edge)
                transformation = (source.get("transformations") or [{}])[0]
                # The column's own type and description (not the input's): all Marquez keeps of a hop.
                self.column_transformations[edge] = lineage.get("transformationType") or transformation.get("type")
                self.column_descriptions[edge] = lineage.get("transformationDescription") or transformation.get("description")

    def columns(self, node: Node, trusted: set[str]) -> dict[str, str]:
        """A dataset's columns as the ``trusted`` jobs last reported them (others only when none did:
        a Spark job that reads a table's metadata reports that schema under the table's name)."""
        reports = self.schemas.get(node, {})
        chosen = [fields for job, fields in reports.items() if job in trusted] or list(reports.values())
        return {name: kind for fields in chosen for name, kind in fields.items()}

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

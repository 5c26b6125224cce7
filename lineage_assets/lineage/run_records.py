"""Every run that read or wrote a dataset, as its events tell it (the event log's, or Marquez's copy):
what it read of each input and wrote of each output, which ``provenance`` follows from one version
of a dataset back to the runs and versions that made it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from lineage_assets.datasets import DATASETS
from lineage_assets.lineage.graph import Node, job_key
from lineage_assets.lineage.marquez import RUN_STATE_EVENTS, MarquezApi
from lineage_assets.lineage.run_facts import DatasetVersion, OffsetRange, snapshot_version
from lineage_assets.settings import Settings


@dataclass(frozen=True)
class DatasetAccess:
    """What a run read or wrote of one dataset: the version its events name (of a snapshot written,
    the one its first commit built on, when the run recorded it: ``parent_recorded``; older events
    did not), and the records, days and files it read or wrote."""

    node: Node
    version: DatasetVersion | None = None  # a table's snapshot, a subject's schema version
    offsets: tuple[OffsetRange, ...] = ()  # a topic's records
    partitions: tuple[str, ...] = ()  # the days it wrote rows into
    files: tuple[str, ...] = ()  # the files it added
    parent_recorded: bool = False
    versions: tuple[str, ...] = ()  # every version its events named, oldest first (a streaming run's commits)

    @property
    def written(self) -> tuple[str, ...]:
        """Every version a run's events say it wrote, oldest first (its last event may name none)."""
        return self.versions or (() if self.version is None else (self.version.version,))

    def as_dict(self, names: dict[Node, str]) -> dict[str, object]:
        found: dict[str, object] = {"dataset": names.get(self.node, f"{self.node[0]}:{self.node[1]}")}
        if self.version is not None:
            found["version"] = self.version.version
            if self.version.data is not None:
                found["data_version"] = self.version.data
        if self.offsets:
            found["offsets"] = [r.as_dict() for r in self.offsets]
        if self.partitions:
            found["partitions"] = list(self.partitions)
        if self.files:
            found["files"] = list(self.files)
        return found


@dataclass(frozen=True)
class RunRecord:
    """One run as its last event with inputs and outputs tells it."""

    run_id: str
    job: str  # "namespace/name"
    state: str
    time: str  # when its last event was sent
    order: int  # its last event's place in the log
    reads: tuple[DatasetAccess, ...]
    writes: tuple[DatasetAccess, ...]

    def wrote(self, node: Node) -> DatasetAccess | None:
        return next((w for w in self.writes if w.node == node), None)

    def read(self, node: Node) -> DatasetAccess | None:
        return next((r for r in self.reads if r.node == node), None)


def _ranges(facet: dict[str, Any] | None) -> tuple[OffsetRange, ...]:
    return tuple(OffsetRange.from_dict(p) for p in (facet or {}).get("partitions") or [])


def _access(dataset: dict[str, Any], output: bool) -> DatasetAccess:
    """What a run read of an input (its input facets) or wrote of an output (its output facets, and
    the version its dataset facets name)."""
    run_facets = (dataset.get("outputFacets") if output else dataset.get("inputFacets")) or {}
    snapshot = run_facets.get("icebergSnapshot")
    if output:  # the version a run wrote is its output dataset's own, which Marquez keeps per run
        version = ((dataset.get("facets") or {}).get("version") or {}).get("datasetVersion")
    else:  # a read's version is in its input facets only (Marquez keeps no dataset facet of a read per run)
        version = snapshot_version((snapshot or {}).get("snapshotId"))
    made = (snapshot if output else None) or {}  # a written snapshot and its parent
    return DatasetAccess(
        node=(dataset["namespace"], dataset["name"]),
        version=None
        if version is None
        else DatasetVersion(
            version,
            parent=snapshot_version(made.get("parentSnapshotId")),
            data=None if output else snapshot_version((snapshot or {}).get("dataSnapshotId")),
            parent_data=snapshot_version(made.get("parentDataSnapshotId")),
        ),
        offsets=_ranges(run_facets.get("kafkaOffsets")),
        partitions=tuple((run_facets.get("partitionsWritten") or {}).get("partitions") or ()),
        files=tuple(f["path"] for f in (run_facets.get("filesWritten") or {}).get("files") or ()),
        parent_recorded=bool(made),
    )


@dataclass
class RunIndex:
    """Every run that read or wrote a dataset, as its last such event tells it (a streaming
    deployment's latest RUNNING event tells what it had read and written so far), with the files and
    versions all its events named (each names the files added since the one before); folded one
    event at a time, in the log's order, so the log's summary keeps it up to date."""

    latest: dict[str, RunRecord] = field(default_factory=dict)
    # run -> output -> every file its events named, and every version (a streaming run's commits)
    files: dict[str, dict[Node, dict[str, None]]] = field(default_factory=dict)
    versions: dict[str, dict[Node, dict[str, None]]] = field(default_factory=dict)

    def add(self, order: int, event: dict[str, Any]) -> None:
        """A run event, the ``order``-th of the log's run events."""
        if not (event.get("inputs") or event.get("outputs")):
            return
        run_id = event["run"]["runId"]
        for output in event.get("outputs") or []:
            node = (output["namespace"], output["name"])
            named = ((output.get("outputFacets") or {}).get("filesWritten") or {}).get("files") or ()
            self.files.setdefault(run_id, {}).setdefault(node, {}).update((f["path"], None) for f in named)
            if version := ((output.get("facets") or {}).get("version") or {}).get("datasetVersion"):
                self.versions.setdefault(run_id, {}).setdefault(node, {})[version] = None
        self.latest[run_id] = RunRecord(
            run_id=run_id,
            job=job_key(event["job"]["namespace"], event["job"]["name"]),
            state=event.get("eventType", "OTHER"),
            time=event["eventTime"],
            order=order,
            reads=tuple(_access(d, output=False) for d in event.get("inputs") or []),
            writes=tuple(_access(d, output=True) for d in event.get("outputs") or []),
        )

    def records(self) -> list[RunRecord]:
        """The runs in the order of their last event with inputs or outputs."""
        records = [
            dataclasses.replace(
                record,
                writes=tuple(
                    dataclasses.replace(
                        written,
                        files=tuple(self.files[run_id].get(written.node, ())),
                        versions=tuple(self.versions.get(run_id, {}).get(written.node, ())),
                    )
                    for written in record.writes
                ),
            )
            for run_id, record in self.latest.items()
        ]
        return sorted(records, key=lambda record: record.order)


def runs_of(run_events: list[dict[str, Any]]) -> list[RunRecord]:
    """``RunIndex.records`` of ``run_events``."""
    index = RunIndex()
    for order, event in enumerate(run_events):
        index.add(order, event)
    return index.records()


def marquez_runs(api: MarquezApi, settings: Settings) -> list[RunRecord]:
    """Every run of the project's jobs as Marquez keeps it: the input and output facets it keeps with
    each run, and the version each output's dataset facets name (from its datasets' versions), in
    the order the runs ended (or last changed, while they run)."""
    written: dict[str, dict[Node, dict[str, Any]]] = {}  # run id -> output -> the dataset facets of its version
    for dataset in DATASETS.values():
        node = dataset.identity(settings).node
        for version in api.dataset_versions(*node):
            if run := version.get("createdByRun"):  # newest first: a run's last version of it
                written.setdefault(run["id"], {}).setdefault(node, version.get("facets") or {})
    found = []
    for job in api.jobs(settings.lineage_namespace):
        for run in api.runs(job["namespace"], job["name"]):
            ins, outs = run.get("inputDatasetVersions") or [], run.get("outputDatasetVersions") or []
            if not ins and not outs:
                continue
            found.append(
                (
                    run.get("endedAt") or run.get("updatedAt") or run["createdAt"],
                    run["id"],
                    job_key(job["namespace"], job["name"]),
                    RUN_STATE_EVENTS.get(run["state"], run["state"]),
                    [_marquez_access(node, facets, {}, output=False) for node, facets in _by_dataset(ins).items()],
                    [
                        _marquez_access(node, facets, written.get(run["id"], {}), output=True)
                        for node, facets in _by_dataset(outs).items()
                    ],
                )
            )
    found.sort(key=lambda item: item[0])
    return [
        RunRecord(run_id, job, state, time, order, tuple(reads), tuple(writes))
        for order, (time, run_id, job, state, reads, writes) in enumerate(found)
    ]


def _by_dataset(entries: list[dict[str, Any]]) -> dict[Node, dict[str, Any]]:
    """A run's input or output dataset versions as Marquez lists them, one per dataset with the
    facets of all (a run that reports a change from its START has a version for each event)."""
    merged: dict[Node, dict[str, Any]] = {}
    for entry in entries:
        ident = entry["datasetVersionId"]
        merged.setdefault((ident["namespace"], ident["name"]), {}).update(entry.get("facets") or {})
    return merged


def _marquez_access(
    node: Node, run_facets: dict[str, Any], written: dict[Node, dict[str, Any]], output: bool
) -> DatasetAccess:
    return _access(
        {
            "namespace": node[0],
            "name": node[1],
            "facets": written.get(node, {}),
            ("outputFacets" if output else "inputFacets"): run_facets,
        },
        output,
    )

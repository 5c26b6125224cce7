"""Provenance: from one version of a dataset (a day's partition, a snapshot, a time) to the runs and
versions that made it, down to the offset ranges of the `orders` topic and the archive files that
hold those records.

Each run's events say which version of each input it read (a table's snapshot, a topic's offset
ranges) and what it wrote (a snapshot, offset ranges, files, the days it wrote rows into); see
``lineage/events.py``, and ``lineage/run_records.py`` for the runs as they tell it. A version of an
Iceberg table holds what every run whose snapshot is among its ancestors wrote (each run records the
snapshot its first commit built on), so the writers of a snapshot that matter for one day are those
of its ancestors that wrote rows of that day. A compaction (the lakehouse upkeep) commits snapshots
no run reports; a run that read or built on one also records whose rows it holds, so the chain
passes over it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from lineage_assets.datasets import DATASETS, Dataset
from lineage_assets.lineage.graph import Node
from lineage_assets.lineage.run_facts import OffsetRange
from lineage_assets.lineage.run_records import DatasetAccess, RunRecord
from lineage_assets.settings import Settings


class ProvenanceError(ValueError):
    """No run wrote the version asked for; the message says which versions there are."""


@dataclass
class Step:
    """A run in a provenance chain: what it wrote that matters here, what it read, and the runs that
    made what it read."""

    run: RunRecord
    wrote: DatasetAccess
    read: list[tuple[DatasetAccess, list[Step]]] = field(default_factory=list)
    archived: list[tuple[RunRecord, DatasetAccess]] = field(default_factory=list)  # where its topic records are kept


@dataclass(frozen=True)
class Provenance:
    dataset: str  # asset key
    partition: str | None
    steps: list[Step]
    names: dict[Node, str]

    def as_dict(self) -> dict[str, object]:
        return {"dataset": self.dataset, "partition": self.partition, "made_by": [self._step(s) for s in self.steps]}

    def _step(self, step: Step) -> dict[str, object]:
        found: dict[str, object] = {
            "run": step.run.run_id,
            "job": step.run.job,
            "state": step.run.state,
            "time": step.run.time,
            "wrote": step.wrote.as_dict(self.names),
            "read": [
                {**version.as_dict(self.names), "made_by": [self._step(s) for s in made]} for version, made in step.read
            ],
        }
        if step.archived:
            found["archived_by"] = [{"run": run.run_id, **files.as_dict(self.names)} for run, files in step.archived]
        return found

    def tree(self) -> str:
        lines = [f"{self.dataset}" + (f" partition {self.partition}" if self.partition else "")]
        for step in self.steps:
            self._lines(step, lines, "  ")
        return "\n".join(lines)

    def _lines(self, step: Step, lines: list[str], indent: str) -> None:
        wrote = step.wrote
        if wrote.offsets:
            made = _ranges_text(wrote.offsets)
        else:
            made = f"snapshot {wrote.version.version}" if wrote.version else "its output"
        lines.append(
            f"{indent}{made} written by {step.run.job} run {step.run.run_id} ({step.run.state} {step.run.time})"
        )
        for read, runs in step.read:
            name = self.names.get(read.node, f"{read.node[0]}:{read.node[1]}")
            if read.offsets:
                lines.append(f"{indent}  read {name}: {_ranges_text(read.offsets)}")
            else:
                at = f" at snapshot {read.version.version}" if read.version else ""
                if read.version and read.version.data:
                    at += f" (a compaction: the rows of snapshot {read.version.data})"
                lines.append(f"{indent}  read {name}{at}")
            for made_by in runs:
                self._lines(made_by, lines, indent + "    ")
        for run, files in step.archived:
            count = f"{len(files.files)} file" + ("s" if len(files.files) != 1 else "")
            lines.append(f"{indent}  those records archived by {run.job} run {run.run_id} in {count}:")
            lines += [f"{indent}    {path}" for path in files.files]


def _ranges_text(ranges: tuple[OffsetRange, ...]) -> str:
    return ", ".join(f"partition {r.partition} offsets {r.start}..{r.end - 1}" for r in ranges)


def _overlaps(a: tuple[OffsetRange, ...], b: tuple[OffsetRange, ...]) -> bool:
    return any(x.partition == y.partition and x.start < y.end and y.start < x.end for x in a for y in b)


def provenance(
    runs: list[RunRecord],
    dataset: Dataset,
    settings: Settings,
    partition: str | None = None,
    version: str | None = None,
    at: dt.datetime | None = None,
) -> Provenance:
    """The chain of runs and versions that made one version of ``dataset``: the latest written (of
    ``partition``, ``version``, or as of ``at``), back to the offsets of the topic its data came from;
    ``runs`` from the event log (``runs_of``) or from Marquez (``marquez_runs``)."""
    names = {d.identity(settings).node: d.key for d in DATASETS.values()}
    node = dataset.identity(settings).node
    candidates = [
        (run, wrote)
        for run in runs
        if (wrote := run.wrote(node)) is not None
        and run.state in ("COMPLETE", "RUNNING")
        and (partition is None or partition in wrote.partitions)
        and (version is None or (wrote.version is not None and wrote.version.version == version))
        and (at is None or dt.datetime.fromisoformat(run.time) <= at)
    ]
    if not candidates:
        written = sorted({w.version.version for run in runs if (w := run.wrote(node)) and w.version})
        days = sorted({day for run in runs if (w := run.wrote(node)) for day in w.partitions})
        raise ProvenanceError(
            f"no run wrote {dataset.key}"
            + (f" partition {partition}" if partition else "")
            + (f" version {version}" if version else "")
            + (f" by {at.isoformat()}" if at else "")
            + (f"; partitions written: {', '.join(days)}" if days else "")
            + (f"; versions written: {', '.join(written)}" if written else "")
        )
    latest, wrote = candidates[-1]
    return Provenance(dataset.key, partition, [_step(runs, latest, wrote, partition)], names)


def _step(runs: list[RunRecord], run: RunRecord, wrote: DatasetAccess, partition: str | None) -> Step:
    step = Step(run=run, wrote=wrote)
    for read in sorted(run.reads, key=lambda read: read.node):  # in one order, whichever the source lists
        step.read.append((read, _writers(runs, run, read, partition)))
        if read.offsets:
            step.archived = [
                (other, written)
                for other in runs
                if other is not run
                and (other_read := other.read(read.node)) is not None
                and _overlaps(other_read.offsets, read.offsets)
                for written in other.writes
                if written.files
            ]
    return step


def _ancestry(runs: list[RunRecord], node: Node, version: str | None) -> set[str]:
    """The versions of a table whose rows ``version`` holds: itself and its ancestors (none without a
    ``version``). Each run records the snapshot its first commit built on; a run that did not is
    taken to have built on the version written before it. A rolled-back or rebuilt table's new
    versions are then no descendants of what it held before. A compaction's snapshots are passed
    over: a run that built on one records whose rows it held, and ``version`` is never one."""
    parents: dict[str, str | None] = {}
    previous = None
    for run in runs:
        wrote = run.wrote(node)
        if wrote is None or not wrote.written:
            continue
        recorded = wrote.version if wrote.parent_recorded else None  # with the snapshot it built on
        parent = recorded.parent if recorded else None
        # A streaming run's commits follow each other, the first on the snapshot the run began with.
        base = recorded.parent_rows_of if recorded else previous
        for made in wrote.written:
            if made not in parents and made not in (base, parent):
                parents[made] = base
            base = made
        previous = wrote.written[-1]
    held: set[str] = set()
    current: str | None = version
    while current is not None and current not in held:
        held.add(current)
        current = parents.get(current)
    return held


def _made_any(wrote: DatasetAccess, held: set[str]) -> bool:
    """Whether a run's write made one of the versions ``held`` (a catch-up run with nothing to read
    names the table's current snapshot, its own parent, and made none)."""
    if wrote.parent_recorded and wrote.version is not None and wrote.written == (wrote.version.parent,):
        return False
    return any(version in held for version in wrote.written)


def _writers(runs: list[RunRecord], reader: RunRecord, read: DatasetAccess, partition: str | None) -> list[Step]:
    """The runs that made what ``reader`` read: of a topic, those that wrote records in the ranges it
    read; of a table, the writers of the snapshot it read and of its ancestors (when ``partition`` is
    asked for, those that wrote rows of it; of a table not partitioned by day, a dimension, all)."""
    # Not by the order of their last events: a deployment's run may have made what was read long
    # before its last event. The offsets read, or the versions held, say who made it.
    writers = [(run, wrote) for run in runs if run is not reader and (wrote := run.wrote(read.node)) is not None]
    if read.offsets:
        return [_step(runs, run, wrote, None) for run, wrote in writers if _overlaps(wrote.offsets, read.offsets)]
    if read.version is None:
        return []
    held = _ancestry(runs, read.node, read.version.rows_of)
    by_day = any(wrote.partitions for _, wrote in writers)  # a table some run wrote days of
    return [
        _step(runs, run, wrote, partition)
        for run, wrote in writers
        if _made_any(wrote, held) and (partition is None or not by_day or partition in wrote.partitions)
    ]


@dataclass(frozen=True)
class Reached:
    """What one run's output reached downstream: every run that read it (transitively), the
    versions they wrote and the Dagster partitions those are."""

    run: RunRecord
    downstream: list[tuple[RunRecord, DatasetAccess]]  # each reached run, with what it wrote
    names: dict[Node, str]

    def partitions(self) -> dict[str, list[str]]:
        """Asset key -> the partitions (days) the reached runs wrote."""
        found: dict[str, set[str]] = {}
        for _, wrote in self.downstream:
            if wrote.node in self.names and wrote.partitions:
                found.setdefault(self.names[wrote.node], set()).update(wrote.partitions)
        return {key: sorted(days) for key, days in sorted(found.items())}

    def as_dict(self) -> dict[str, object]:
        return {
            "run": self.run.run_id,
            "job": self.run.job,
            "reached": [
                {"run": run.run_id, "job": run.job, "state": run.state, "wrote": wrote.as_dict(self.names)}
                for run, wrote in self.downstream
            ],
            "partitions": self.partitions(),
        }

    def tree(self) -> str:
        lines = [f"{self.run.job} run {self.run.run_id} reached:"]
        for run, wrote in self.downstream:
            name = self.names.get(wrote.node, f"{wrote.node[0]}:{wrote.node[1]}")
            what = f" version {wrote.version.version}" if wrote.version else ""
            days = f" partitions {', '.join(wrote.partitions)}" if wrote.partitions else ""
            lines.append(f"  {name}{what}{days}: {run.job} run {run.run_id} ({run.state})")
        if not self.downstream:
            lines.append("  nothing downstream read what it wrote")
        return "\n".join(lines)


def _reads_what_was_written(runs: list[RunRecord], writer: RunRecord, wrote: DatasetAccess, reader: RunRecord) -> bool:
    """Whether ``reader`` read records ``writer`` wrote: topic offsets that overlap, or a snapshot of
    the table descended from the writer's (of a day the writer wrote rows of)."""
    read = reader.read(wrote.node)
    if read is None or reader is writer:
        return False
    if wrote.offsets or read.offsets:
        return _overlaps(wrote.offsets, read.offsets)
    if read.version is None or not _made_any(wrote, _ancestry(runs, wrote.node, read.version.rows_of)):
        return False
    days = {day for written in reader.writes for day in written.partitions}
    return not wrote.partitions or not days or bool(days & set(wrote.partitions))


def reached(runs: list[RunRecord], run_id: str, settings: Settings) -> Reached:
    """Every run downstream of ``run_id`` that read what it wrote, transitively, in order."""
    names = {d.identity(settings).node: d.key for d in DATASETS.values()}
    start = next((run for run in runs if run.run_id == run_id), None)
    if start is None:
        raise ProvenanceError(f"no run {run_id!r} read or wrote a dataset in the lineage")
    found: dict[str, tuple[RunRecord, DatasetAccess]] = {}
    frontier = [start]
    while frontier:
        writer = frontier.pop()
        for wrote in writer.writes:
            for reader in runs:
                if reader.run_id not in found and _reads_what_was_written(runs, writer, wrote, reader):
                    for output in reader.writes:
                        found.setdefault(reader.run_id, (reader, output))
                    frontier.append(reader)
    downstream = sorted(found.values(), key=lambda item: item[0].order)
    return Reached(start, downstream, names)

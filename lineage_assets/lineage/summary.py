"""What the lineage check and queries need of a lineage folder's event log, kept up to date as the log
grows: the graph of its run events (``LineageGraph``), its static events (the published design) and
the lines that are no event; and, apart, what each run read and wrote (``RunIndex``, for provenance).
Each keeps the place in the log it has read up to.

They are kept in the folder (``summary.pickle``, ``runs.pickle``) and brought up to date by whichever
reader finds the log longer: only the lines appended since are read, not a year of events. They are
not maintained on append, so that emitting stays one write to the log (emission must not slow with
history); nor by the sender, which would then have to know every reader's structures. One written by
other code (a module of its structures changed since) is rebuilt from the log once. Segments removed
by retention stay in them; a rebuild knows only the segments kept.
"""

from __future__ import annotations

import hashlib
import pickle
from pathlib import Path
from typing import Any, TypeVar

import attrs

from lineage_assets.lineage import graph as graph_module
from lineage_assets.lineage import run_facts as run_facts_module
from lineage_assets.lineage import run_records as run_records_module
from lineage_assets.lineage.event_log import EventLog, Segment, Unreadable, is_run_event, lineage_event
from lineage_assets.lineage.graph import LineageGraph
from lineage_assets.lineage.run_records import RunIndex
from lineage_assets.private_files import replace_private

SUMMARY_FILE, RUNS_FILE = "summary.pickle", "runs.pickle"
F = TypeVar("F", bound="Fold")


def _code_version() -> str:
    """The sources of the modules whose structures it holds: a summary pickled by other code is not read."""
    sources = hashlib.sha256()
    for source in (graph_module.__file__, run_records_module.__file__, run_facts_module.__file__, __file__):
        sources.update(Path(source).read_bytes())
    return sources.hexdigest()


@attrs.define
class Fold:
    """A fold of the log kept in a file of the lineage folder, with the place in the log it reached."""

    offset: int = 0  # the log-wide offset it has read up to
    number: int = 0  # the lines of that offset's segment before it
    version: str = ""

    def take(self, segment: Segment, number: int, text: bytes) -> None:
        raise NotImplementedError

    def fold(self, log: EventLog) -> bool:
        """Read the lines appended since; True when there were any."""
        moved = False
        for segment, number, line in log.numbered(self.offset, self.number):
            self.offset, self.number, moved = line.end, number, True
            if line.text.strip():
                self.take(segment, number, line.text)
        return moved


@attrs.define
class LogSummary(Fold):
    """What the check and the graph queries read: the graph of the run events, the static events and
    the lines that are none."""

    graph: LineageGraph = attrs.field(factory=LineageGraph)
    run_events: int = 0  # folded into the graph
    design: list[dict[str, Any]] = attrs.field(factory=list)  # the static events, in order
    unreadable: list[Unreadable] = attrs.field(factory=list)

    def ran(self) -> set[str]:
        """The jobs ("namespace/name") with a run in the log."""
        return {job for job, summary in self.graph.jobs.items() if summary.runs}

    def take(self, segment: Segment, number: int, text: bytes) -> None:
        try:
            event = lineage_event(text)
        except ValueError as error:
            self.unreadable.append(Unreadable(segment.path, number, str(error).split("\n")[0]))
            return
        if is_run_event(event):
            self.graph.add(event)
            self.run_events += 1
        else:
            self.design.append(event)


@attrs.define
class RunsSummary(Fold):
    """What provenance reads: each run's reads and writes (a file of its own, as it is as large as
    the graph and the graph queries do not need it)."""

    runs: RunIndex = attrs.field(factory=RunIndex)
    run_events: int = 0

    def take(self, segment: Segment, number: int, text: bytes) -> None:
        try:
            event = lineage_event(text)
        except ValueError:
            return  # the log's summary names it
        if is_run_event(event):
            self.runs.add(self.run_events, event)
            self.run_events += 1


def _kept(log: EventLog, name: str, kind: type[F]) -> F:
    """The fold of ``kind`` kept in ``name``, brought up to date (and kept again, when it moved)."""
    path = log.folder / name
    version = _code_version()
    try:
        kept = pickle.loads(path.read_bytes())
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, TypeError, ImportError):
        kept = None
    if not isinstance(kept, kind) or kept.version != version or kept.offset > log.end():
        kept = kind(version=version)  # none yet, other code's, or of a log since replaced
    if kept.fold(log):
        replace_private(path, pickle.dumps(kept, protocol=pickle.HIGHEST_PROTOCOL))
    return kept


def summary(log: EventLog) -> LogSummary:
    """The log's summary, brought up to date."""
    return _kept(log, SUMMARY_FILE, LogSummary)


def runs(log: EventLog) -> RunIndex:
    """What each run of the log read and wrote, brought up to date."""
    return _kept(log, RUNS_FILE, RunsSummary).runs

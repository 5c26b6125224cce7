"""What the lineage check and queries need of a lineage folder's event log, kept up to date as the log
grows: the graph of its run events (``LineageGraph``), what each run read and wrote (``RunIndex``, for
provenance), its static events (the published design) and the lines that are no event, with the place
in the log they reach.

It is kept in the folder (``summary.pickle``) and brought up to date by whichever reader finds the log
longer than it: only the lines appended since are read, not a year of events. It is not maintained on
append, so that emitting stays one write to the log (emission must not slow with history); nor by the
sender, which would then have to know every reader's structures. A summary written by other code (a
module of its structures changed since) is rebuilt from the log once. Segments removed by retention stay in the
summary; a rebuild knows only the segments kept.
"""

from __future__ import annotations

import hashlib
import pickle
from pathlib import Path

import attrs

from lineage_assets.lineage import graph as graph_module
from lineage_assets.lineage import provenance as provenance_module
from lineage_assets.lineage.event_log import EventLog, Unreadable, is_run_event, lineage_event
from lineage_assets.lineage.graph import LineageGraph
from lineage_assets.lineage.provenance import RunIndex
from lineage_assets.private_files import replace_private

SUMMARY_FILE = "summary.pickle"


def _code_version() -> str:
    """The sources of the modules whose structures it holds: a summary pickled by other code is not read."""
    sources = hashlib.sha256()
    for source in (graph_module.__file__, provenance_module.__file__, __file__):
        sources.update(Path(source).read_bytes())
    return sources.hexdigest()


@attrs.define
class LogSummary:
    graph: LineageGraph = attrs.field(factory=LineageGraph)
    runs: RunIndex = attrs.field(factory=RunIndex)  # what each run read and wrote, for provenance
    run_events: int = 0  # folded into the graph and the runs
    design: list[dict] = attrs.field(factory=list)  # the static events, in order
    unreadable: list[Unreadable] = attrs.field(factory=list)
    offset: int = 0  # the log-wide offset it has read up to
    number: int = 0  # the lines of that offset's segment before it
    version: str = ""

    def ran(self) -> set[str]:
        """The jobs ("namespace/name") with a run in the log."""
        return {job for job, summary in self.graph.jobs.items() if summary.runs}

    def fold(self, log: EventLog) -> bool:
        """Read the lines appended since; True when there were any."""
        moved = False
        for segment, number, line in log.numbered(self.offset, self.number):
            self.offset, self.number, moved = line.end, number, True
            if not line.text.strip():
                continue
            try:
                event = lineage_event(line.text)
            except ValueError as error:
                self.unreadable.append(Unreadable(segment.path, number, str(error).split("\n")[0]))
                continue
            if is_run_event(event):
                self.graph.add(event)
                self.runs.add(self.run_events, event)
                self.run_events += 1
            else:
                self.design.append(event)
        return moved


def summary(log: EventLog) -> LogSummary:
    """The log's summary, brought up to date (and kept, when it moved)."""
    path = log.folder / SUMMARY_FILE
    version = _code_version()
    try:
        kept = pickle.loads(path.read_bytes())
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, TypeError, ImportError):
        kept = None
    if not isinstance(kept, LogSummary) or kept.version != version or kept.offset > log.end():
        kept = LogSummary(version=version)  # none yet, other code's, or of a log since replaced
    if kept.fold(log):
        replace_private(path, pickle.dumps(kept, protocol=pickle.HIGHEST_PROTOCOL))
    return kept

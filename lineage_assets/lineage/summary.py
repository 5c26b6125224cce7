"""What the lineage check and queries need of a lineage folder's event log, kept up to date as the log
grows: the graph of its run events (``LineageGraph``), its static events (the published design) and
the lines that are no event, with the place in the log they reach.

It is kept in the folder (``summary.pickle``) and brought up to date by whichever reader finds the log
longer than it: only the lines appended since are read, not a year of events. It is not maintained on
append, so that emitting stays one write to the log (emission must not slow with history); nor by the
sender, which would then have to know every reader's structures. A summary written by other code (its
graph module changed since) is rebuilt from the log once. Segments removed by retention stay in the
summary; a rebuild knows only the segments kept.
"""

from __future__ import annotations

import hashlib
import pickle
from pathlib import Path

import attrs

from lineage_assets.lineage import graph as graph_module
from lineage_assets.lineage.event_log import EventLog, Unreadable, is_run_event, lineage_event
from lineage_assets.lineage.graph import LineageGraph
from lineage_assets.private_files import replace_private

SUMMARY_FILE = "summary.pickle"


def _code_version() -> str:
    """The graph module's source: a summary pickled by other code is not read."""
    return hashlib.sha256(Path(graph_module.__file__).read_bytes()).hexdigest()


@attrs.define
class LogSummary:
    graph: LineageGraph = attrs.field(factory=LineageGraph)
    run_events: int = 0  # folded into the graph
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

"""A lineage folder's event log: every OpenLineage event the project emitted, one JSON line each, in
order; how far delivery got; and the dead letters, the lines delivery set aside.

Only complete lines count. An append that did not finish (a crash or a full disk mid-write) leaves a
torn tail without its newline: the next append sets it aside as a dead letter before it writes, so no
event is ever glued onto it, and delivery never reads past a line that has no newline yet.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs

from lineage_assets.private_files import OWNER_ONLY, replace_private


@contextmanager
def file_lock(path: Path, blocking: bool = True):
    path.parent.mkdir(mode=OWNER_ONLY, parents=True, exist_ok=True)
    with path.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield None
            return
        try:
            yield handle
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@attrs.frozen
class Line:
    """One complete line of the log: where it starts and its bytes."""

    offset: int
    text: bytes

    @property
    def end(self) -> int:
        return self.offset + len(self.text)


@attrs.frozen
class Unreadable:
    """A line of the log that is not an OpenLineage run event."""

    path: Path
    number: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path} line {self.number}: {self.reason}"


def is_run_event(event: dict) -> bool:
    """A run's event, not a static one (a ``JobEvent`` or ``DatasetEvent`` of the designed graph)."""
    return "run" in event


def lineage_event(text: bytes | str) -> dict:
    """The event a line holds, a run's or a static one; ValueError naming what is wrong when it is none."""
    event = json.loads(text)
    if not isinstance(event, dict):
        raise ValueError(f"a JSON {type(event).__name__}, not an event")
    if "dataset" in event and "job" not in event:  # a DatasetEvent
        if not isinstance(event["dataset"], dict) or not {"namespace", "name"} <= set(event["dataset"]):
            raise ValueError("not an OpenLineage dataset event (no dataset namespace or name)")
        required = ("eventTime", "dataset")
    elif "run" in event:
        required = ("eventTime", "run", "job")
    else:  # a JobEvent
        required = ("eventTime", "job")
    missing = [name for name in required if not isinstance(event.get(name), (str, dict)) or not event[name]]
    if missing or ("run" in required and "runId" not in event["run"]):
        raise ValueError(f"not an OpenLineage event (no {', '.join(missing) or 'run id'})")
    if "job" in required and not {"namespace", "name"} <= set(event["job"]):
        raise ValueError("not an OpenLineage event (no job namespace or name)")
    try:
        zoned = dt.datetime.fromisoformat(event["eventTime"]).tzinfo is not None
    except (TypeError, ValueError):
        zoned = False
    if not zoned:
        raise ValueError(f"eventTime {event['eventTime']!r} is no ISO 8601 time with its zone")
    return event


class EventLog:
    def __init__(self, folder: Path):
        self.folder = folder
        self.path = folder / "events.jsonl"
        self.cursor_path = folder / "delivered.offset"
        self.dead_letters_path = folder / "dead-letters.jsonl"
        self._append_lock = folder / "events.lock"
        folder.mkdir(mode=OWNER_ONLY, parents=True, exist_ok=True)

    # --- writing ------------------------------------------------------------------------------
    def append(self, line: str) -> None:
        """Append one line (it ends with a newline), after setting aside a torn tail."""
        with file_lock(self._append_lock), self.path.open("a+b") as log:
            self._set_aside_torn_tail(log)
            log.write(line.encode())

    def _set_aside_torn_tail(self, log) -> None:
        size = log.seek(0, os.SEEK_END)
        if size == 0:
            return
        log.seek(size - 1)
        if log.read(1) == b"\n":
            return
        start = self._line_start(log, size)
        log.seek(start)
        torn = log.read(size - start)
        self.set_aside(Line(start, torn), "torn: an append that did not finish (a crash or a full disk)")
        log.truncate(start)

    @staticmethod
    def _line_start(log, end: int, chunk: int = 65536) -> int:
        """Where the line holding byte ``end - 1`` starts."""
        position = end
        while position > 0:
            step = min(chunk, position)
            log.seek(position - step)
            found = log.read(step).rfind(b"\n")
            if found >= 0:
                return position - step + found + 1
            position -= step
        return 0

    def set_aside(self, line: Line, reason: str) -> None:
        """``line`` into the dead letters, with why and when."""
        record = {
            "offset": line.offset,
            "reason": reason,
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "line": line.text.decode(errors="replace").rstrip("\n"),
        }
        with file_lock(self.folder / "dead-letters.lock"), self.dead_letters_path.open("a") as out:
            out.write(json.dumps(record) + "\n")

    # --- reading ------------------------------------------------------------------------------
    def lines(self, offset: int = 0) -> Iterator[Line]:
        """The complete lines from ``offset`` on (blank ones skipped); a tail without its newline is not
        a line yet."""
        if not self.path.exists():
            return
        with self.path.open("rb") as source:
            source.seek(offset)
            for text in source:
                if not text.endswith(b"\n"):
                    return
                if text.strip():
                    yield Line(offset, text)
                offset += len(text)

    def read(self, run_id: str | None = None) -> tuple[list[dict], list[Unreadable]]:
        """Every event recorded (of one run, when given), in order, and the lines that are none."""
        events, unreadable = [], []
        if not self.path.exists():
            return events, unreadable
        with self.path.open("rb") as source:
            for number, text in enumerate(source, start=1):
                if not text.endswith(b"\n"):
                    break  # not a line yet
                if not text.strip() or (run_id is not None and run_id.encode() not in text):
                    continue
                try:
                    event = lineage_event(text)
                except ValueError as error:
                    unreadable.append(Unreadable(self.path, number, str(error).split("\n")[0]))
                    continue
                if run_id is None or (is_run_event(event) and event["run"]["runId"] == run_id):
                    events.append(event)
        return events, unreadable

    def dead_letters(self) -> list[dict]:
        if not self.dead_letters_path.exists():
            return []
        with self.dead_letters_path.open() as source:
            return [json.loads(line) for line in source if line.strip()]

    def replace_dead_letters(self, kept: list[dict]) -> None:
        with file_lock(self.folder / "dead-letters.lock"):
            replace_private(self.dead_letters_path, "".join(json.dumps(record) + "\n" for record in kept))

    # --- delivery's cursor --------------------------------------------------------------------
    def cursor(self) -> int:
        try:
            return int(self.cursor_path.read_text().strip() or 0)
        except FileNotFoundError:
            return 0

    def advance(self, offset: int) -> None:
        replace_private(self.cursor_path, str(offset))

    def pending(self) -> int:
        """Complete lines not yet delivered (nor set aside)."""
        return sum(1 for _ in self.lines(self.cursor()))

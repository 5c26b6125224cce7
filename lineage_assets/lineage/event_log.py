"""A lineage folder's event log: every OpenLineage event the project emitted, one JSON line each, in
order; how far delivery got; and the dead letters, the lines delivery set aside.

The log is a series of segment files (``segments/<offset>.jsonl``), each named by the log-wide byte
offset of its first line, as Kafka names its segments: one number, the delivery cursor, then names
both a segment and the offset within it, and a cursor written before segments existed still means
the same bytes. Appends go to the newest segment; once it holds ``segment_bytes`` the next append
starts another. A segment is removed only when delivery has passed its end (every event in it is
delivered or set aside) and it is older than the retention, so no undelivered event is ever lost.
A log of one ``events.jsonl`` (before segments) becomes the first segment when the folder is opened.

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
from typing import IO, Any, BinaryIO, TypedDict

import attrs

from lineage_assets.private_files import OWNER_ONLY, replace_private


@contextmanager
def file_lock(path: Path, blocking: bool = True) -> Iterator[IO[str] | None]:
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


class DeadLetter(TypedDict):
    """A line delivery set aside: where it was in the log, why, when, and its text."""

    offset: int
    reason: str
    at: str
    line: str


def is_run_event(event: dict[str, Any]) -> bool:
    """A run's event, not a static one (a ``JobEvent`` or ``DatasetEvent`` of the designed graph)."""
    return "run" in event


def lineage_event(text: bytes | str) -> dict[str, Any]:
    """The event a line holds, a run's or a static one; ValueError naming what is wrong when it is none."""
    event = json.loads(text)
    if not isinstance(event, dict):
        raise ValueError(f"a JSON {type(event).__name__}, not an event")
    if "dataset" in event and "job" not in event:  # a DatasetEvent
        if not isinstance(event["dataset"], dict) or not {"namespace", "name"} <= set(event["dataset"]):
            raise ValueError("not an OpenLineage dataset event (no dataset namespace or name)")
        required: tuple[str, ...] = ("eventTime", "dataset")
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


SEGMENT_BYTES = 64 * 2**20  # about ten days of the pipeline run hourly with its three deployments


@attrs.frozen
class Segment:
    """One file of the log: ``base`` is the log-wide offset of its first byte."""

    base: int
    path: Path

    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0


class EventLog:
    def __init__(self, folder: Path, segment_bytes: int = SEGMENT_BYTES, retention_days: float | None = None):
        self.folder = folder
        self.segments_dir = folder / "segments"
        self.segment_bytes = segment_bytes
        self.retention_days = retention_days  # None: keep every segment
        self.cursor_path = folder / "delivered.offset"
        self.dead_letters_path = folder / "dead-letters.jsonl"
        self._append_lock = folder / "events.lock"
        self._active: Segment | None = None  # the segment this process last appended to
        folder.mkdir(mode=OWNER_ONLY, parents=True, exist_ok=True)
        if (folder / "events.jsonl").exists():
            self._upgrade()

    def _upgrade(self) -> None:
        """The single file of a log from before segments becomes its first segment (its offsets, and
        so the delivery cursor, stay as they were)."""
        with file_lock(self._append_lock):
            legacy = self.folder / "events.jsonl"
            if legacy.exists():
                self.segments_dir.mkdir(mode=OWNER_ONLY, exist_ok=True)
                first = self._segment(0).path
                if first.exists():
                    raise RuntimeError(f"{legacy} and {first} both exist: move one away to read the other")
                legacy.rename(first)

    def _segment(self, base: int) -> Segment:
        return Segment(base, self.segments_dir / f"{base:020d}.jsonl")

    def segments(self) -> list[Segment]:
        """The log's segments, oldest first."""
        try:
            names = [entry.name for entry in self.segments_dir.iterdir() if entry.name.endswith(".jsonl")]
        except FileNotFoundError:
            return []
        return [self._segment(int(name.removesuffix(".jsonl"))) for name in sorted(names)]

    @property
    def path(self) -> Path:
        """The segment appends go to now."""
        segments = self.segments()
        return (segments[-1] if segments else self._segment(0)).path

    def end(self) -> int:
        """The log-wide offset after its last byte."""
        segments = self.segments()
        return segments[-1].base + segments[-1].size() if segments else 0

    # --- writing ------------------------------------------------------------------------------
    def append(self, line: str) -> None:
        """Append one line (it ends with a newline), after setting aside a torn tail; in a new segment
        once the newest holds ``segment_bytes``."""
        with file_lock(self._append_lock):
            active = self._newest()
            self.segments_dir.mkdir(mode=OWNER_ONLY, exist_ok=True)
            with active.path.open("a+b") as log:
                size = self._set_aside_torn_tail(log, active.base)
                if size < self.segment_bytes:
                    log.write(line.encode())
                    return
            self._active = self._segment(active.base + size)
            with self._active.path.open("xb") as log:
                log.write(line.encode())
            self.remove_expired()

    def _newest(self) -> Segment:
        """The newest segment, for the holder of the append lock: the one this process last appended
        to while it is not full (no process starts another before), else the newest listed."""
        try:
            if self._active is not None and self._active.path.stat().st_size < self.segment_bytes:
                return self._active
        except FileNotFoundError:
            pass  # removed with its folder: list what there is
        segments = self.segments()
        self._active = segments[-1] if segments else self._segment(0)
        return self._active

    def _set_aside_torn_tail(self, log: BinaryIO, base: int) -> int:
        """The segment's size once a torn tail is set aside."""
        size = log.seek(0, os.SEEK_END)
        if size == 0:
            return 0
        log.seek(size - 1)
        if log.read(1) == b"\n":
            return size
        start = self._line_start(log, size)
        log.seek(start)
        torn = log.read(size - start)
        self.set_aside(Line(base + start, torn), "torn: an append that did not finish (a crash or a full disk)")
        log.truncate(start)
        return start

    @staticmethod
    def _line_start(log: BinaryIO, end: int, chunk: int = 65536) -> int:
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

    def remove_expired(self, now: float | None = None) -> list[Path]:
        """Remove the segments delivery has passed whose last write is older than the retention; the
        segments removed."""
        if self.retention_days is None:
            return []
        limit = (time.time() if now is None else now) - self.retention_days * 86400
        delivered, removed = self.cursor(), []
        segments = self.segments()
        for segment, following in zip(segments, segments[1:]):
            if following.base > delivered:
                break  # from here on, events wait
            try:
                if segment.path.stat().st_mtime < limit:
                    segment.path.unlink()
                    removed.append(segment.path)
            except FileNotFoundError:
                pass  # removed meanwhile by another process
        return removed

    def set_aside(self, line: Line, reason: str) -> None:
        """``line`` into the dead letters, with why and when."""
        record: DeadLetter = {
            "offset": line.offset,
            "reason": reason,
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "line": line.text.decode(errors="replace").rstrip("\n"),
        }
        with file_lock(self.folder / "dead-letters.lock"), self.dead_letters_path.open("a") as out:
            out.write(json.dumps(record) + "\n")

    # --- reading ------------------------------------------------------------------------------
    def numbered(self, offset: int = 0, number: int = 0) -> Iterator[tuple[Segment, int, Line]]:
        """The complete lines from log-wide ``offset`` on, blank ones too, each with its segment and its
        number there (``number``: the lines of ``offset``'s segment before it); a tail without its
        newline is not a line yet."""
        segments = self.segments()
        for segment, following in zip(segments, [*segments[1:], None]):
            if following is not None and following.base <= offset:
                continue
            if offset < segment.base:
                offset, number = segment.base, 0
            try:
                with segment.path.open("rb") as source:
                    source.seek(offset - segment.base)
                    for text in source:
                        if not text.endswith(b"\n"):
                            return
                        number += 1
                        yield segment, number, Line(offset, text)
                        offset += len(text)
            except FileNotFoundError:
                continue  # removed by retention meanwhile: it was delivered

    def lines(self, offset: int = 0) -> Iterator[Line]:
        """The complete lines from log-wide ``offset`` on (blank ones skipped)."""
        return (line for _, _, line in self.numbered(offset) if line.text.strip())

    def read(self, run_id: str | None = None) -> tuple[list[dict[str, Any]], list[Unreadable]]:
        """Every event recorded (of one run, when given), in order, and the lines that are none."""
        events, unreadable = [], []
        for segment, number, line in self.numbered():
            if not line.text.strip() or (run_id is not None and run_id.encode() not in line.text):
                continue
            try:
                event = lineage_event(line.text)
            except ValueError as error:
                unreadable.append(Unreadable(segment.path, number, str(error).split("\n")[0]))
                continue
            if run_id is None or (is_run_event(event) and event["run"]["runId"] == run_id):
                events.append(event)
        return events, unreadable

    def dead_letters(self) -> list[DeadLetter]:
        if not self.dead_letters_path.exists():
            return []
        with self.dead_letters_path.open() as source:
            return [json.loads(line) for line in source if line.strip()]

    def replace_dead_letters(self, kept: list[DeadLetter]) -> None:
        with file_lock(self.folder / "dead-letters.lock"):
            replace_private(self.dead_letters_path, "".join(json.dumps(record) + "\n" for record in kept))

    # --- delivery's cursor --------------------------------------------------------------------
    def cursor(self) -> int:
        try:
            return int(self.cursor_path.read_text().strip() or 0)
        except FileNotFoundError:
            return 0

    def position(self) -> tuple[Path, int]:
        """Where delivery stands: the segment the cursor is in and the offset within it."""
        cursor = self.cursor()
        segment = next((s for s in reversed(self.segments()) if s.base <= cursor), self._segment(0))
        return segment.path, cursor - segment.base

    def advance(self, offset: int) -> None:
        replace_private(self.cursor_path, str(offset))

    def pending(self) -> int:
        """Complete lines not yet delivered (nor set aside)."""
        return sum(1 for _ in self.lines(self.cursor()))

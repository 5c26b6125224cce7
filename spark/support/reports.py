"""What a job tells its caller: one JSON report at the end (``--report``, as the class of
``lineage_assets/job_specs.py`` its caller reads) and, while it runs, JSON lines in its progress file."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from lineage_assets.job_specs import Report


def append_progress(path: str, record: dict) -> None:
    """One JSON line in the progress file that a supervisor reads."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("a") as out:
        out.write(json.dumps(record, default=str) + "\n")


def observed_lineage(args: argparse.Namespace, column_lineage: dict) -> dict:
    """A job's observed column lineage (``spark/lineage.report``), also in its progress file at once,
    so a deployment reports it from its first RUNNING event on."""
    if args.progress_file:
        append_progress(args.progress_file, {"event": "lineage", "column_lineage": column_lineage})
    return column_lineage


def column_entry(nulls: int | None, low=None, high=None) -> dict:
    """One column of a ``quality`` report entry: its nulls, and its min and max as numbers when known."""
    entry = {} if nulls is None else {"nulls": int(nulls)}
    return {**entry, **({} if low is None else {"min": float(low)}), **({} if high is None else {"max": float(high)})}


def quality_entry(rows: int, size: int, files: int, columns: dict[str, dict]) -> dict:
    """A job's ``quality`` report entry: rows, bytes and files, and per column ``column_entry``."""
    return {"rows": rows, "bytes": size, "files": files, "columns": columns}


def write_report(path: str, report: type[Report], started: float, **fields) -> None:
    """The job's report, as the class its caller reads (lineage_assets/job_specs.py)."""
    report(**fields, duration_seconds=round(time.monotonic() - started, 3)).write(Path(path))

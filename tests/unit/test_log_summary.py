"""The log's summary (``lineage/summary.py``) answers as a full read of the log does (check, impact,
trace, the design, provenance's runs), and keeps up by reading only what was appended since, across
segments."""

from __future__ import annotations

import dataclasses
import json

from bench.lineage_history import write_history
from lineage_assets.lineage import summary as summary_module
from lineage_assets.lineage.check import check, check_log, log_design, log_notes, not_yet_run
from lineage_assets.lineage.design import PublishedDesign
from lineage_assets.lineage.emitter import LineageEmitter
from lineage_assets.lineage.event_log import is_run_event
from lineage_assets.lineage.graph import LineageGraph
from lineage_assets.lineage.queries import QUERIES, ask, resolve
from lineage_assets.lineage.run_records import runs_of
from lineage_assets.lineage.summary import SUMMARY_FILE, summary
from lineage_assets.lineage.summary import runs as summary_runs
from lineage_assets.settings import Settings
from tests.unit.test_emitter import event

SUBJECTS = (
    "orders.price",
    "lakehouse/orders.price",
    "lakehouse/supplier_stats.total_price",
    "supplier_stats_live.count",
)


def answers_of_a_full_read(log, settings) -> dict:
    """``check`` and each query as they were before the summary: over every event of the log, read whole."""
    recorded, unreadable = log.read()
    runs = [e for e in recorded if is_run_event(e)]
    static = [e for e in recorded if not is_run_event(e)]
    design = PublishedDesign.from_events(static) if static else None
    graph = LineageGraph.from_events(runs)
    ran = {job for job, known in graph.jobs.items() if known.runs}
    return {
        "check": [f"unreadable event at {line}" for line in unreadable] + check(runs, settings, design=design),
        "runs": runs_of(runs),
        "not yet run": not_yet_run(PublishedDesign.from_events(static), ran),
        **{
            f"{query} {subject}": QUERIES[query](graph, resolve(subject, settings), settings).as_dict()
            for query in QUERIES
            for subject in SUBJECTS
        },
    }


def answers_of_the_summary(log, settings) -> dict:
    return {
        "check": check_log(log, settings),
        "runs": summary_runs(log).records(),
        "not yet run": log_notes(log),
        **{
            f"{query} {subject}": ask(query, subject, settings, log=log).as_dict()
            for query in QUERIES
            for subject in SUBJECTS
        },
    }


def test_the_summary_answers_as_a_full_read_and_reads_only_what_was_appended(tmp_path, monkeypatch):
    settings = dataclasses.replace(Settings(), state_dir=tmp_path)
    emitter = LineageEmitter(settings.lineage_dir, None, segment_bytes=2**20)
    # Eight days: a schema drift on the sixth, the deployments' weekly restart on the eighth.
    counts = write_history(emitter, settings, 8, running_interval_s=1800, drift_day=5)
    assert counts["runs"] > 1000 and counts["runs ended FAIL"] and counts["replays"]
    log = emitter.log
    assert len(log.segments()) > 3
    with log.path.open("a") as out:
        out.write('{"eventTime": "2026-01-04T00:00:00"}\n')  # a line that is no event, named by both
    first = answers_of_the_summary(log, settings)
    assert first == answers_of_a_full_read(log, settings)
    assert first["check"][0].startswith(f"unreadable event at {log.path} line ")
    assert (settings.lineage_dir / SUMMARY_FILE).exists()

    # Later: more events, in a segment of their own; the summary reads those lines only.
    end = log.end()
    read_from = []
    numbered = type(log).numbered
    monkeypatch.setattr(
        type(log),
        "numbered",
        lambda self, offset=0, number=0: read_from.append(offset) or numbered(self, offset, number),
    )
    for n in range(3):
        emitter.emit(event(n))
    later = answers_of_the_summary(log, settings)
    assert read_from[0] == end and set(read_from) == {end, log.end()}  # each fold from where it was, once
    monkeypatch.undo()
    assert later == answers_of_a_full_read(log, settings)
    assert later["check"] != first["check"]  # the new runs never ended: gaps of their own
    assert log_design(log).jobs == PublishedDesign.from_events([e for e in log.read()[0] if not is_run_event(e)]).jobs


def test_a_summary_of_other_code_or_of_a_log_since_replaced_is_rebuilt(tmp_path, monkeypatch):
    settings = dataclasses.replace(Settings(), state_dir=tmp_path)
    emitter = LineageEmitter(settings.lineage_dir, None)
    for n in range(5):
        emitter.emit(event(n))
    assert summary(emitter.log).run_events == 5
    monkeypatch.setattr(summary_module, "_code_version", lambda: "other code")
    assert summary(emitter.log).run_events == 5  # rebuilt, not added to
    (settings.lineage_dir / SUMMARY_FILE).write_bytes(b"not a pickle")
    assert summary(emitter.log).run_events == 5
    for segment in emitter.log.segments():
        segment.path.unlink()  # the log replaced by a shorter one
    emitter.log.append(json.dumps(event(9)) + "\n")
    assert summary(emitter.log).run_events == 1

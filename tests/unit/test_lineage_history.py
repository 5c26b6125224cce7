"""The scale benchmark's history (``bench/lineage_history.py``): events a real run would send, as
many as it says, and a lineage the checks find whole."""

from __future__ import annotations

import dataclasses
from collections import Counter

from bench.lineage_history import write_history
from lineage_assets.datasets import ARCHIVE, LAKEHOUSE_ORDERS, SUPPLIER_STATS, SUPPLIER_STATS_LIVE
from lineage_assets.lineage.check import check
from lineage_assets.lineage.emitter import LineageEmitter
from lineage_assets.lineage.provenance import provenance, reached
from lineage_assets.lineage.run_records import runs_of
from lineage_assets.settings import Settings
from tests.openlineage_schemas import validate_event


def test_two_days_of_history_are_valid_events_counted_as_written_and_a_whole_lineage(tmp_path):
    settings = dataclasses.replace(Settings(), state_dir=tmp_path)
    emitter = LineageEmitter(settings.lineage_dir, None)
    counts = write_history(emitter, settings, 2, running_interval_s=900, drift_day=1)
    log = emitter.events()
    assert len(log) == counts["events"] and all(validate_event(event) == [] for event in log)
    runs = {event["run"]["runId"] for event in log}
    assert len(runs) == counts["runs"] and counts["runs: dagster"] == 48 and counts["runs: check"] == 3 * 48
    states = Counter(event["eventType"] for event in log)
    assert states["FAIL"] == counts["runs ended FAIL"] == 1 and counts["schema drifts"] == counts["replays"] == 1
    # A whole lineage: the deployments still run at its end, and only they lack a terminal event.
    deployed = {dataset.job.lineage_name for dataset in (ARCHIVE, SUPPLIER_STATS_LIVE, LAKEHOUSE_ORDERS)}
    assert check(log, settings, running_jobs=deployed) == []
    assert len(check(log, settings)) == 3
    # Provenance works through it: the last day's figures go back to the ingestion's snapshots and offsets.
    answer = provenance(runs_of(log), SUPPLIER_STATS, settings, partition="2026-01-02").as_dict()
    (stats,) = answer["made_by"]
    assert stats["read"][0]["made_by"], "no ingestion run made the snapshot read"
    ingestion = stats["read"][0]["made_by"][-1]["run"]  # the deployment that was running that day
    assert "2026-01-02" in reached(runs_of(log), ingestion, settings).partitions()[SUPPLIER_STATS.key]

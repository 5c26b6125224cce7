"""The supervision sensor's reading of a deployment: each Iceberg commit of the continuous ingestion
becomes one materialization (with the days to rebuild and the table as the commit left it) and one
evaluation of the schema check, reported once. And the cadence each deployment runs at."""

from __future__ import annotations

import json

import dagster as dg

from lineage_assets.assets.deployments import new_commits
from lineage_assets.datasets import ARCHIVE, LAKEHOUSE_ORDERS, SUPPLIER_STATS_LIVE
from lineage_assets.job_specs import STREAMING_JOBS
from lineage_assets.settings import Settings
from lineage_assets.streaming.deployments import LocalDeployments

QUALITY = {"rows": 5, "bytes": 900, "files": 1, "columns": {"price": {"nulls": 0, "min": 1.0, "max": 9.5}}}


def commit(batch: int, days: list[str], incompatible: int = 0, replayed: int = 0, **table) -> dict:
    return {
        "event": "committed",
        "batch": batch,
        "rows": 5,
        "days": days,
        "dead_letters": incompatible,
        "schema_incompatible": incompatible,
        "dead_letters_replayed": replayed,
        "schema_versions": [],
        **table,
    }


def test_each_commit_is_reported_once_with_its_days_and_table_and_a_held_back_day_waits(tmp_path):
    deployments = LocalDeployments(Settings(state_dir=tmp_path))
    folder = deployments.folder(LAKEHOUSE_ORDERS.key)
    folder.mkdir(parents=True)
    (folder / "runner.json").write_text(json.dumps({"pid": 0, "run_id": "run-1"}))
    unreadable = {"columns": {}, "derivations": {}, "dataset": [], "unresolved": ["Expand"]}
    records = [
        {"event": "lineage", "column_lineage": unreadable},  # the plan the deployment observed at its start
        commit(0, ["2026-11-22"], snapshot_id=11, schema_id=0, quality=QUALITY),
        commit(1, ["2026-11-23"], incompatible=2),
    ]
    (folder / "progress.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))

    seen: dict[str, int] = {}
    first, first_check, second, second_check, lineage = new_commits(deployments, LAKEHOUSE_ORDERS.key, seen, {})
    assert isinstance(first, dg.AssetMaterialization) and isinstance(first_check, dg.AssetCheckEvaluation)
    assert first.metadata["days"].value == ["2026-11-22"] and first.metadata["snapshot_id"].value == "11"
    assert first.metadata["dagster/row_count"].value == 5 and first_check.passed
    assert first.metadata["deployment/run_id"].value == "run-1" and first.metadata["deployment/batch"].value == 0
    # Two records of a version the pipeline cannot read: the day waits, and the check fails.
    assert second.metadata["days"].value == [] and second.metadata["days_held_back"].value == ["2026-11-23"]
    assert "snapshot_id" not in second.metadata and not second_check.passed
    # What the deployment's plan computes, once per batch of commits: blocking, as supplier_stats builds on it.
    assert (lineage.check_name, lineage.passed, lineage.blocking) == ("lineage_matches_catalog", False, True)
    assert "no column lineage observed: the plan cannot be read: Expand" in lineage.metadata["gaps"].value
    assert seen == {"run-1": 2}
    assert new_commits(deployments, LAKEHOUSE_ORDERS.key, seen, {}) == []


def trigger_of(spec: dict) -> float:
    arguments = spec["arguments"]
    return float(arguments[arguments.index("--trigger-seconds") + 1])


def test_the_live_windows_run_a_batch_every_second_the_table_and_archive_every_five_unless_one_trigger_is_given(
    tmp_path,
):
    settings = Settings(state_dir=tmp_path)
    deployments = LocalDeployments(settings)
    assert {name: trigger_of(deployments.spec(name)) for name in STREAMING_JOBS} == {
        ARCHIVE.key: 5.0,
        LAKEHOUSE_ORDERS.key: 5.0,
        SUPPLIER_STATS_LIVE.key: 1.0,
    }
    assert {trigger_of(LocalDeployments(settings, trigger_seconds=2).spec(name)) for name in STREAMING_JOBS} == {2.0}

"""Dagster's event log as the second witness of the lineage log: the materializations it recorded
whose lineage runs the log lacks (events lost before they were recorded leave only this trace)."""

from __future__ import annotations

import datetime as dt

import dagster as dg

from lineage_assets.assets.common import asset_key
from lineage_assets.assets.run_lineage import dagster_run_of
from lineage_assets.datasets import DATASETS
from lineage_assets.lineage.run_facts import DagsterRun

PAGE = 1000


def materializations_without_lineage(instance: dg.DagsterInstance, recorded: list[dict]) -> list[str]:
    """Each materialization of a project asset since the first of the lineage log's ``recorded`` run
    events whose lineage run has no COMPLETE there (a deployment's commit: whose deployment run has no
    event there), as a gap."""
    if not recorded:
        since = None
    else:
        since = min(dt.datetime.fromisoformat(event["eventTime"]) for event in recorded).timestamp()
    completed = {event["run"]["runId"] for event in recorded if event["eventType"] == "COMPLETE"}
    reported = {event["run"]["runId"] for event in recorded}
    runs: dict[str, DagsterRun] = {}
    gaps = []
    for dataset in DATASETS.values():
        records_filter = dg.AssetRecordsFilter(asset_key=asset_key(dataset), after_timestamp=since)
        cursor = None
        while True:
            page = instance.fetch_materializations(records_filter, limit=PAGE, cursor=cursor, ascending=True)
            for record in page.records:
                at = dt.datetime.fromtimestamp(record.timestamp, dt.UTC).isoformat(timespec="seconds")
                materialization = record.asset_materialization
                deployment = materialization.metadata.get("deployment/run_id") if materialization else None
                if deployment is not None:
                    if str(deployment.value) not in reported:
                        gaps.append(
                            f"{dataset.key} materialized at {at} by deployment run {deployment.value}: "
                            f"no event of that run in the lineage log"
                        )
                    continue
                if record.run_id not in runs:
                    runs[record.run_id] = dagster_run_of(instance, record.run_id)
                lineage_run = runs[record.run_id].asset_run_id(dataset)
                if lineage_run not in completed:
                    gaps.append(
                        f"{dataset.key} materialized at {at} by Dagster run {record.run_id}: its lineage run "
                        f"{lineage_run} has no COMPLETE in the lineage log (its events were not recorded)"
                    )
            if not page.has_more:
                break
            cursor = page.cursor
    return gaps

"""Dagster's run status as the lineage check's evidence that a lineage run without its end is under
way: its Dagster run is in progress, not ended nor unknown to the instance.

Dagster keeps that status itself: the code server marks a run whose worker process died failed, and
run monitoring (on in the project's ``dagster.yaml``) one whose container is gone. The lineage events
name no process to ask instead: Dagster's engine events record a worker's pid, not its host.
"""

from __future__ import annotations

import datetime as dt

import dagster as dg

from lineage_assets.assets.run_lineage import dagster_run_of
from lineage_assets.datasets import CHECKS, DATASETS

# A run under way as Dagster counts one (its IN_PROGRESS_RUN_STATUSES, which it does not export).
UNDER_WAY = [
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
    dg.DagsterRunStatus.SUSPENDED,
]


def lineage_runs_in_progress(instance: dg.DagsterInstance) -> dict[str, dt.datetime]:
    """Each lineage run of a Dagster run the instance holds in progress (the Dagster run's own, its
    assets' and its checks'), with when that Dagster run started (or was created, while it starts)."""
    in_progress = {}
    for record in instance.get_run_records(filters=dg.RunsFilter(statuses=UNDER_WAY)):
        dagster_run = dagster_run_of(instance, record.dagster_run.run_id)
        since = (
            dt.datetime.fromtimestamp(record.start_time, dt.UTC)
            if record.start_time is not None
            else dagster_run.started_at
        )
        lineage_runs = [
            dagster_run.lineage_run_id,
            *(dagster_run.asset_run_id(dataset) for dataset in DATASETS.values()),
            *(dagster_run.check_run_id(check) for check in CHECKS.values()),
        ]
        in_progress.update(dict.fromkeys(lineage_runs, since))
    return in_progress

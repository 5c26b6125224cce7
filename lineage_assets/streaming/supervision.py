"""Supervision of streaming deployments: live health as asset observations, and a truthful end for
deployments whose runner died without reporting one."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal

import dagster as dg
from openlineage.client.event_v2 import RunState

from lineage_assets.assets.common import asset_key
from lineage_assets.lineage import events
from lineage_assets.resources.kafka import KafkaResource
from lineage_assets.resources.lineage import emitter_for
from lineage_assets.streaming.deployments import STREAMING_JOBS, LocalDeployments, read_json

SUPERVISION_INTERVAL_SECONDS = 30


def consumer_lag(kafka: KafkaResource, topic: str, progress: dict | None) -> int | None:
    """Records in the topic beyond what the deployment's last batch committed."""
    committed = ((progress or {}).get("end_offsets") or {}).get(topic)
    if committed is None:
        return None
    ends = kafka.end_offsets(topic)
    return sum(max(0, end - committed.get(str(partition), 0)) for partition, end in ends.items())


def _stop_orphaned_job(runner: dict) -> bool:
    pgid = runner.get("spark_pgid")
    if not pgid:
        return False
    try:
        os.killpg(pgid, signal.SIGTERM)
        return True
    except ProcessLookupError:
        return False


def supervise(deployments: LocalDeployments, kafka: KafkaResource) -> tuple[list[dg.AssetObservation], list[str]]:
    """One supervision pass: observations of running deployments, and FAIL for each deployment
    whose runner is gone without a terminal event (recorded in ``ended.json``, so exactly once)."""
    settings = deployments.lakehouse.settings()
    observations, ended = [], []
    for name, (dataset, _) in STREAMING_JOBS.items():
        status = deployments.status(name)
        if status.run_id is None:
            continue
        if status.running:
            progress = status.last_progress
            lag = consumer_lag(kafka, settings.orders_topic, progress)
            observations.append(dg.AssetObservation(asset_key=asset_key(dataset), metadata={
                "deployment/run_id": status.run_id,
                "deployment/rows_per_second": float((progress or {}).get("processed_rows_per_second") or 0.0),
                "deployment/consumer_lag": lag if lag is not None else -1,
                "deployment/last_batch_time": (progress or {}).get("time") or "",
            }))
        elif status.ended is None:
            folder = deployments.folder(name)
            runner = read_json(folder / "runner.json") or {}
            orphan_stopped = _stop_orphaned_job(runner)
            reason = ("the deployment's runner process is gone without reporting an end (killed, out of memory "
                      "or machine restart)" + ("; its orphaned Spark job was stopped" if orphan_stopped else ""))
            (folder / "ended.json").write_text(json.dumps({
                "state": RunState.FAIL.value, "run_id": status.run_id, "at": dt.datetime.now(dt.UTC).isoformat(),
                "by": "supervision sensor", "reason": reason}))
            interval = (read_json(folder / "deployment.json") or {}).get("running_interval")
            emitter_for(settings).emit(events.asset_event(
                RunState.FAIL, dataset, None, settings, run_id=status.run_id, error=reason, running_interval=interval))
            ended.append(name)
    return observations, ended


@dg.sensor(minimum_interval_seconds=SUPERVISION_INTERVAL_SECONDS, default_status=dg.DefaultSensorStatus.RUNNING,
           description="Observes streaming deployments (rows/s, consumer lag, last batch) and ends with FAIL "
                       "any deployment whose process died without reporting an end.")
def streaming_deployments_supervisor(context: dg.SensorEvaluationContext, kafka: KafkaResource) -> dg.SensorResult:
    observations, ended = supervise(LocalDeployments(kafka.lakehouse), kafka)
    for name in ended:
        context.log.warning(f"deployment {name} died without a terminal event: FAIL emitted")
    return dg.SensorResult(asset_events=observations)

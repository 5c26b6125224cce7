"""The streaming area: deployments managed from Dagster (a job to deploy, stop or drain them) and
supervised by a sensor (live health as asset observations, each Iceberg commit as a materialization,
and a truthful end for deployments whose runner died without reporting one)."""

import json
from enum import Enum

import dagster as dg

from lineage_assets.assets.common import asset_key, lineage_check_evaluation
from lineage_assets.assets.lakehouse import Rebuild, latest_metadata, table_metadata
from lineage_assets.datasets import DATASETS, LAKEHOUSE_ORDERS
from lineage_assets.job_specs import STREAMING_JOBS
from lineage_assets.resources.kafka import KafkaResource
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.streaming.deployments import Deployments, deployments_for

SUPERVISION_INTERVAL_SECONDS = 30


def consumer_lag(kafka: KafkaResource, topic: str, progress: dict | None) -> int | None:
    """Records in the topic beyond what the deployment's last batch committed."""
    committed = ((progress or {}).get("end_offsets") or {}).get(topic)
    if committed is None:
        return None
    ends = kafka.end_offsets(topic)
    return sum(max(0, end - committed.get(str(partition), 0)) for partition, end in ends.items())


def new_commits(
    deployments: Deployments, name: str, seen: dict[str, int], previous: dict
) -> list[dg.AssetMaterialization | dg.AssetCheckEvaluation]:
    """The deployment's Iceberg commits not reported yet, as materializations carrying the days to
    rebuild (so the `supplier_stats` asset sensor reacts to continuous ingestion as to a catch-up
    run), each with its schema check. ``previous`` is the metadata of the asset's last
    materialization; ``seen`` (run id -> commits reported) is the sensor's cursor and is updated."""
    status = deployments.status(name)
    if status.run_id is None:
        return []
    commits = deployments.files(name).progress("committed")
    reported = seen.get(status.run_id, 0)
    seen[status.run_id] = len(commits)
    dataset = DATASETS[name]
    events: list[dg.AssetMaterialization | dg.AssetCheckEvaluation] = []
    for commit in commits[reported:]:
        rebuild = Rebuild.after(
            previous, commit["days"], commit["schema_incompatible"], commit["dead_letters_replayed"]
        )
        previous = {**previous, **rebuild.values}
        events += [
            dg.AssetMaterialization(
                asset_key=asset_key(dataset),
                metadata={
                    **rebuild.metadata,
                    "rows_out": commit["rows"],
                    "dead_letters": commit["dead_letters"],
                    "schema_incompatible": commit["schema_incompatible"],
                    "dead_letters_replayed": commit["dead_letters_replayed"],
                    "deployment/run_id": status.run_id,
                    "deployment/batch": commit["batch"],
                    **table_metadata(commit.get("snapshot_id"), commit.get("schema_id"), commit.get("quality")),
                },
            ),
            rebuild.check_evaluation(),
        ]
    if commits[reported:]:  # what the deployment's plan computes, held against the design, once per batch of commits
        events.append(lineage_check_evaluation(dataset, deployments.files(name).observation(deployments.settings)))
    return events


def supervise(deployments: Deployments, kafka: KafkaResource) -> tuple[list[dg.AssetObservation], list[str]]:
    """One supervision pass: observations of running deployments, and the end of dead ones (their
    orphans stopped, FAIL once: see ``end_if_dead``). Also returns the deployments that failed."""
    observations, failed = [], []
    for name in STREAMING_JOBS:
        status = deployments.status(name)
        if status.running:
            progress = status.last_progress
            lag = consumer_lag(kafka, deployments.settings.orders_topic, progress)
            observations.append(
                dg.AssetObservation(
                    asset_key=asset_key(DATASETS[name]),
                    metadata={
                        "deployment/run_id": status.run_id,
                        "deployment/rows_per_second": float((progress or {}).get("processed_rows_per_second") or 0.0),
                        "deployment/consumer_lag": lag if lag is not None else -1,
                        "deployment/last_batch_time": (progress or {}).get("time") or "",
                    },
                )
            )
        elif status.state == "dead":
            deployments.end_if_dead(name, by="supervision sensor")
        if deployments.status(name).state == "failed":
            failed.append(name)
    return observations, failed


@dg.sensor(
    minimum_interval_seconds=SUPERVISION_INTERVAL_SECONDS,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Observes streaming deployments (rows/s, consumer lag, last batch) and ends with FAIL "
    "any deployment whose process died without reporting an end (and redeploys it when "
    "LINEAGE_ASSETS_RESTART_DEAD_DEPLOYMENTS is on).",
)
def streaming_deployments_supervisor(
    context: dg.SensorEvaluationContext, environment: SettingsResource, kafka: KafkaResource
) -> dg.SensorResult:
    deployments = deployments_for(environment.settings)
    seen = json.loads(context.cursor) if context.cursor else {}
    commits = new_commits(
        deployments, LAKEHOUSE_ORDERS.key, seen, latest_metadata(context.instance, asset_key(LAKEHOUSE_ORDERS))
    )
    observations, failed = supervise(deployments, kafka)
    if environment.settings.restart_dead_deployments:
        for name in failed:
            # A new lineage run, resuming from the checkpoint; the failed one keeps its FAIL.
            context.log.info(f"deployment {name} failed; redeployed: {deployments.deploy(name)}")
    return dg.SensorResult(asset_events=[*commits, *observations], cursor=json.dumps(seen))


class DeploymentAction(str, Enum):
    DEPLOY = "deploy"
    STOP = "stop"  # ABORT
    DRAIN = "drain"  # finish what is available, then COMPLETE


class DeploymentsConfig(dg.Config):
    action: DeploymentAction = DeploymentAction.DEPLOY
    assets: list[str] = []  # asset keys, e.g. "lakehouse/orders"; empty = every streaming asset
    running_interval: int = 10


@dg.op(description="Deploy, stop or drain the streaming jobs in continuous mode (outside this run).")
def manage_streaming_deployments(
    context: dg.OpExecutionContext, config: DeploymentsConfig, environment: SettingsResource
) -> None:
    deployments = deployments_for(environment.settings, running_interval=config.running_interval)
    for name in config.assets or list(STREAMING_JOBS):
        if config.action == DeploymentAction.DEPLOY:
            outcome = deployments.deploy(name)
        else:
            outcome = deployments.stop(name, drain=config.action == DeploymentAction.DRAIN)
        context.log.info(f"{name}: {outcome}")


@dg.job(description="Streaming deployments from the UI: launch with config action=deploy|stop|drain.")
def streaming_deployments():
    manage_streaming_deployments()

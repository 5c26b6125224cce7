"""Dagster metadata and arguments derived from the dataset catalog, shared by every asset module."""

from __future__ import annotations

import dagster as dg

from lineage_assets.catalog import DATASETS, OWNERS, Check, Dataset, orders_reader_schema_json
from lineage_assets.lineage.queries import declared_impact
from lineage_assets.resources.kafka import KafkaResource
from lineage_assets.resources.spark_jobs import SparkJobsResource
from lineage_assets.settings import Settings
from lineage_assets.source_schemas import value_subject


def asset_key(dataset: Dataset) -> dg.AssetKey:
    return dg.AssetKey(dataset.asset_key_path)


def column_schema(dataset: Dataset) -> dg.TableSchema:
    return dg.TableSchema(columns=[dg.TableColumn(c.name, c.type, description=c.description) for c in dataset.columns])


def column_lineage(dataset: Dataset) -> dg.TableColumnLineage:
    return dg.TableColumnLineage(deps_by_column={
        column: [dg.TableColumnDep(asset_key=asset_key(DATASETS[s.dataset]), column_name=s.column) for s in sources]
        for column, sources in dataset.column_lineage.items()
    })


def definition_metadata(dataset: Dataset, settings: Settings) -> dict:
    identity = dataset.identity(settings)
    metadata = {
        "dagster/column_schema": column_schema(dataset),
        "openlineage/namespace": identity.namespace,
        "openlineage/name": identity.name,
    }
    if dataset.column_lineage:
        metadata["dagster/column_lineage"] = column_lineage(dataset)
    impacted = declared_impact(dataset, settings)
    if impacted:  # "what breaks if I change this column", on the asset's page
        metadata["lineage/impact"] = dg.MetadataValue.md(f"```\n{impacted}\n```")
    return metadata


def asset_spec_arguments(dataset: Dataset, settings: Settings, group: str) -> dict:
    """The @asset keyword arguments every asset takes from its dataset."""
    return {
        "key": asset_key(dataset),
        "description": dataset.description,
        "kinds": {dataset.kind.value, dataset.job.engine},
        "group_name": group,
        "owners": list(OWNERS),
        "metadata": definition_metadata(dataset, settings),
        "deps": [asset_key(DATASETS[key]) for key in dataset.upstream],
    }


def check_arguments(check: Check) -> dict:
    """The @asset_check keyword arguments every separately evaluated check takes from the catalog."""
    return {"asset": asset_key(DATASETS[check.dataset]), "name": check.name, "description": check.description}


class DeployedElsewhere(RuntimeError):
    """A catch-up run was asked for a streaming job that runs as a deployment (same checkpoint)."""


def ensure_not_deployed(dataset: Dataset, kafka: KafkaResource) -> None:
    """Catch-up runs and a continuous deployment of one job share its checkpoint: never both at once."""
    from lineage_assets.streaming.deployments import deployments_for  # deployments build on the assets

    status = deployments_for(kafka.lakehouse).status(dataset.key)
    if status.running:
        raise DeployedElsewhere(
            f"{dataset.key} runs as a continuous deployment (pid {status.pid}, run {status.run_id}); it keeps the "
            f"asset up to date. Stop it first for a catch-up run: lineage-assets stop {dataset.key}")


def orders_source_arguments(kafka: KafkaResource, spark_jobs: SparkJobsResource, dataset: Dataset) -> list[str]:
    """spark-submit arguments that read the orders topic as the catalog's reader schema; the job
    judges each registered writer version of the topic's subject against it."""
    settings = kafka.lakehouse.settings()
    return [
        "--bootstrap-servers", settings.kafka_servers,
        "--topic", settings.orders_topic,
        "--value-schema", orders_reader_schema_json(),
        "--registry-url", settings.schema_registry_url,
        "--subject", value_subject(settings.orders_topic),
        "--checkpoint", spark_jobs.checkpoint(dataset.job.name),
    ]


def job_metadata(dataset: Dataset, report: dict) -> dict:
    """What every Spark-backed materialization reports: rows, offsets, duration, column lineage."""
    metadata = {
        "rows_in": report.get("rows_in", 0),
        "rows_out": report.get("rows_written", 0),
        "duration_seconds": report.get("duration_seconds", 0.0),
        "kafka/start_offsets": dg.MetadataValue.json(report.get("start_offsets") or {}),
        "kafka/end_offsets": dg.MetadataValue.json(report.get("end_offsets") or {}),
        "schema_versions": dg.MetadataValue.json(
            [{k: v for k, v in version.items() if k != "fields"} for version in report.get("schema_versions") or ()]),
    }
    if dataset.column_lineage:
        metadata["dagster/column_lineage"] = column_lineage(dataset)
    return metadata


def consumed_records(report: dict) -> int:
    """Records the job's checkpoint now covers in the source (sum of end offsets over partitions)."""
    ends = report.get("end_offsets") or {}
    return sum(sum(partitions.values()) for partitions in ends.values())

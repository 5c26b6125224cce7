"""The asset of every daily table the catalog declares computed by a transform (``DailyTable``): one
definition for all of them, with the checks their declarations ask for. A new such dataset needs no
line here."""

from decimal import Decimal

import dagster as dg

from lineage_assets.assets.common import (
    asset_key,
    asset_spec_arguments,
    lineage_check_result,
    lineage_check_spec,
    run_metadata,
    run_table_job,
)
from lineage_assets.assets.lakehouse import DAILY, table_metadata
from lineage_assets.datasets import DATASETS, DailyTable, Dataset
from lineage_assets.job_specs import TableJobReport, table_job
from lineage_assets.lineage.run_facts import OutputStatistics, RunFacts, snapshot_written, table_read
from lineage_assets.resources.lineage import LineageResource
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.resources.spark_jobs import SparkJobsResource


def declared_checks(dataset: Dataset, computed: DailyTable) -> list[dg.AssetCheckSpec]:
    """The checks a declaration asks for: each reconciliation, and that the required columns are filled."""
    key = asset_key(dataset)
    specs = [dg.AssetCheckSpec(r.check_name, asset=key, description=r.description) for r in computed.reconciles]
    if computed.required:
        specs.append(dg.AssetCheckSpec(computed.required_check, asset=key, description=computed.required_description))
    return specs


def check_results(computed: DailyTable, report: TableJobReport) -> list[dg.AssetCheckResult]:
    """The declared checks of one run, from its report."""
    results = [
        dg.AssetCheckResult(
            check_name=r.check_name,
            passed=Decimal(report.sums[r.column]["written"]) == Decimal(report.sums[r.column]["read"]),
            metadata={"written": report.sums[r.column]["written"], "read": report.sums[r.column]["read"]},
        )
        for r in computed.reconciles
    ]
    if computed.required:
        missing = [row for row in report.rows if any(row[column] is None for column in computed.required)]
        results.append(
            dg.AssetCheckResult(
                check_name=computed.required_check,
                passed=not missing,
                severity=dg.AssetCheckSeverity.WARN,
                metadata={"rows_missing_one": dg.MetadataValue.json(missing)},
            )
        )
    return results


def daily_table_asset(dataset: Dataset, computed: DailyTable) -> dg.AssetsDefinition:
    """The asset of one daily table: a run of ``spark/table_job.py`` for the partition's day."""

    @dg.asset(
        partitions_def=DAILY,
        check_specs=[lineage_check_spec(dataset), *declared_checks(dataset, computed)],
        **asset_spec_arguments(dataset, "lakehouse"),
    )
    def daily_table(
        context: dg.AssetExecutionContext,
        environment: SettingsResource,
        spark_jobs: SparkJobsResource,
        lineage: LineageResource,
    ) -> dg.MaterializeResult:
        def facts_of(report: TableJobReport) -> RunFacts:
            return RunFacts(
                OutputStatistics(rows=report.rows_written, bytes=report.bytes_written, files=report.files_written),
                "CREATE" if report.table_created else "OVERWRITE",
                version=snapshot_written(report.snapshot_id, report.schema_id, report.parent_snapshot_id),
                quality=report.quality,
                reads=tuple(
                    table_read(DATASETS[key], r["snapshot_id"], r["schema_id"], r["data_snapshot_id"])
                    for key, r in zip(dataset.inputs, report.reads)
                ),
                partitions=(report.day,),
            )

        job = table_job(environment.settings, dataset, context.partition_key)
        report, facts, observation = run_table_job(context, dataset, job, spark_jobs, lineage, facts_of)
        return dg.MaterializeResult(
            metadata={
                **run_metadata(report, facts),
                "day": report.day,
                "read_as_of": dg.MetadataValue.json({key: r["as_of"] for key, r in zip(dataset.inputs, report.reads)}),
                "files_written": report.files_written,
                "bytes_written": report.bytes_written,
                "table_created": report.table_created,
                "rows": dg.MetadataValue.json(report.rows),
                **table_metadata(report.snapshot_id, report.schema_id, report.quality),
            },
            check_results=[lineage_check_result(dataset, observation), *check_results(computed, report)],
        )

    return daily_table


DAILY_TABLES = [daily_table_asset(d, d.computed_by) for d in DATASETS.values() if d.computed_by is not None]

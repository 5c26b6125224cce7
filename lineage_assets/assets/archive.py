"""The raw archive of `orders` in S3, and its reconciliation with the topic."""

import dagster as dg
from dagster_pyspark import PySparkResource

from lineage_assets.assets.common import (
    Outcome,
    StreamingRun,
    asset_key,
    check_arguments,
    orders_read_by,
    streaming_asset,
)
from lineage_assets.datasets import ARCHIVE, CHECKS
from lineage_assets.job_specs import ArchiveReport, archive_job, archive_location
from lineage_assets.lineage.run_facts import Assertion, OutputStatistics, RunFacts, WrittenFile
from lineage_assets.resources.lineage import LineageResource
from lineage_assets.resources.settings import SettingsResource

ARCHIVE_RECONCILE = CHECKS["archive_reconciles_with_topic"]


def archived(run: StreamingRun[ArchiveReport]) -> Outcome:
    """What a catch-up run of the archive job archived (its files, their bytes and column metrics)."""
    report = run.report
    return Outcome(
        RunFacts(
            OutputStatistics(rows=report.rows_written, bytes=report.bytes_written, files=report.files_written),
            "CREATE" if report.files_total == report.files_written and report.files_written else None,
            quality=report.quality,
            reads=(orders_read_by(run.settings, report),),
            files=tuple(WrittenFile(path, size) for path, size in report.files_added),
        ),
        metadata={
            "files_written": report.files_written,
            "bytes_written": report.bytes_written,
            "files_total": report.files_total,
            "records_consumed": report.consumed_records,
            "path": archive_location(run.settings),
            "quality": dg.MetadataValue.json(report.quality),  # of the records this run archived
        },
    )


orders_archive = streaming_asset(ARCHIVE, archive_job, "archive", archived)


@dg.asset_check(**check_arguments(ARCHIVE_RECONCILE))
def archive_reconciles_with_topic(
    context: dg.AssetCheckExecutionContext,
    environment: SettingsResource,
    pyspark: PySparkResource,
    lineage: LineageResource,
) -> dg.AssetCheckResult:
    with lineage.check_run(context, ARCHIVE_RECONCILE) as run:
        event = context.instance.get_latest_materialization_event(asset_key(ARCHIVE))
        consumed = event.asset_materialization.metadata["records_consumed"].value if event else 0
        # Reading the sink's folder through Spark honours its commit log: only committed files count.
        records = pyspark.spark_session.read.json(archive_location(environment.settings)).select(
            "topic", "partition", "offset"
        )
        rows = records.count()
        distinct = records.distinct().count()
        return run.result(
            [
                Assertion(
                    ARCHIVE_RECONCILE.name,
                    "row_count",
                    rows == consumed,
                    "records archived equal the topic offsets consumed",
                    expected=str(consumed),
                    actual=str(rows),
                ),
                Assertion(
                    ARCHIVE_RECONCILE.name,
                    "unique",
                    distinct == rows,
                    "no (topic, partition, offset) archived twice",
                    expected="0",
                    actual=str(rows - distinct),
                ),
            ],
            metadata={"archived_records": rows, "distinct_offsets": distinct, "consumed_offsets": consumed},
        )

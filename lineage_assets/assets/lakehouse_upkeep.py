"""The lakehouse tables' hourly upkeep: a job compacting `orders`' closed days, expiring old
snapshots and deleting orphan files, and its schedule."""

import datetime as dt

import dagster as dg

from lineage_assets.job_specs import LAKEHOUSE_UPKEEP_SCRIPT, LakehouseUpkeepReport, lakehouse_upkeep_arguments
from lineage_assets.preflight import require_services
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.resources.spark_jobs import SparkJobsResource
from lineage_assets.settings import ENV_PREFIX, Settings, SettingsError


@dg.op(
    description="Compact the small files of `orders`' days before today (UTC; Iceberg's rewrite_data_files), then "
    "expire the lakehouse tables' snapshots older than LINEAGE_ASSETS_SNAPSHOT_RETENTION_HOURS, keeping the last "
    "LINEAGE_ASSETS_SNAPSHOTS_KEPT (Iceberg's expire_snapshots), and the files only they referenced; then delete "
    "the files nothing in a table references older than LINEAGE_ASSETS_ORPHAN_FILE_AGE_HOURS (Iceberg's "
    "remove_orphan_files). No row changes."
)
def lakehouse_upkeep(
    context: dg.OpExecutionContext, environment: SettingsResource, spark_jobs: SparkJobsResource
) -> dg.Output[dict]:
    settings = environment.settings
    require_services(settings)
    arguments = lakehouse_upkeep_arguments(settings, dt.datetime.now(dt.UTC))
    report = LakehouseUpkeepReport(**spark_jobs.submit(LAKEHOUSE_UPKEEP_SCRIPT, list(arguments), log=context.log))
    for table in report.compacted:
        context.log.info(
            f"{table['table']}: {table['rewritten_data_files_count']} files of the days before "
            f"{table['closed_before']} compacted into {table['added_data_files_count']}"
            + (
                f"; {table['failed_data_files_count']} left as they were (their group failed: see the job's log)"
                if table["failed_data_files_count"]
                else ""
            )
        )
    for table in report.expired:
        context.log.info(f"{table['table']}: {table['snapshots_before']} snapshots, {table['snapshots_after']} kept")
    for table in report.orphans:
        deleted = table["deleted_orphan_files"]
        context.log.info(
            f"{table['table']}: {len(deleted)} files no snapshot references, older than {table['older_than']}, "
            "deleted" + "".join(f"\n  {location}" for location in deleted)
        )
    return dg.Output(
        {"compacted": report.compacted, "expired": report.expired, "orphans": report.orphans},
        metadata={
            "duration_seconds": report.duration_seconds,
            **{f"compacted/{table['table']}": dg.MetadataValue.json(table) for table in report.compacted},
            **{f"expired/{table['table']}": dg.MetadataValue.json(table) for table in report.expired},
            **{f"orphans_deleted/{table['table']}": len(table["deleted_orphan_files"]) for table in report.orphans},
        },
    )


UPKEEP_MAX_RUNTIME_S = 6 * 3600
UNFINISHED_RUN_STATUSES = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


@dg.job(
    description="The lakehouse tables' upkeep: the closed days of `orders` compacted, so that reads stay fast, "
    "old snapshots expired, so that commits stay fast, and the files of failed writes deleted.",
    # Canceled past it by Dagster's run monitoring: a run whose process died would otherwise stay
    # STARTED and hold every later hour back (the schedule skips while one has not ended).
    tags={"dagster/max_runtime": str(UPKEEP_MAX_RUNTIME_S)},
)
def lakehouse_maintenance():
    lakehouse_upkeep()


def lakehouse_maintenance_schedule(context: dg.ScheduleEvaluationContext):
    # An upkeep that outlasts its interval (a backlog of days to compact) is not joined by a second one,
    # which would compact the same days and fail at its commit.
    unfinished = context.instance.get_run_records(
        filters=dg.RunsFilter(job_name=lakehouse_maintenance.name, statuses=UNFINISHED_RUN_STATUSES), limit=1
    )
    if unfinished:
        run = unfinished[0].dagster_run
        return dg.SkipReason(
            f"{lakehouse_maintenance.name} run {run.run_id} has not ended ({run.status.value}): this upkeep skipped"
        )
    return dg.RunRequest()


def upkeep_schedule(settings: Settings) -> dg.ScheduleDefinition:
    """The upkeep on the settings' cron schedule, running by default: each snapshot a continuous
    deployment leaves makes its every later commit slower."""
    on_cron = dg.schedule(
        job=lakehouse_maintenance,
        cron_schedule=settings.upkeep_schedule,
        default_status=dg.DefaultScheduleStatus.RUNNING,
    )
    try:
        return on_cron(lakehouse_maintenance_schedule)
    except dg.DagsterInvalidDefinitionError as error:  # Dagster's cron parser, on each field's values
        raise SettingsError(f"{ENV_PREFIX}UPKEEP_SCHEDULE={settings.upkeep_schedule!r}: {error}") from None

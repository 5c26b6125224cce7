"""The live per-supplier statistics topic, fed by a streaming window job."""

import dagster as dg

from lineage_assets.assets.common import Outcome, StreamingRun, orders_read_by, streaming_asset
from lineage_assets.datasets import SUPPLIER_STATS_LIVE
from lineage_assets.job_specs import LiveStatsReport, live_stats_job
from lineage_assets.lineage.run_facts import OutputStatistics, RunFacts, offset_ranges


def windows_published(run: StreamingRun[LiveStatsReport]) -> Outcome:
    """The windows the watermark closed during a catch-up run, published to the statistics topic."""
    topic = run.settings.supplier_stats_topic
    report = run.report
    return Outcome(
        RunFacts(
            OutputStatistics(rows=report.windows_written),
            "CREATE" if topic in run.topics_created else None,
            reads=(orders_read_by(run.settings, report),),
            offsets=offset_ranges(topic, report.output_start_offsets, report.output_end_offsets),
        ),
        metadata={"kafka/output_end_offsets": dg.MetadataValue.json(report.output_end_offsets.get(topic, {}))},
    )


supplier_stats_live = streaming_asset(
    SUPPLIER_STATS_LIVE,
    live_stats_job,
    "live_stats",
    windows_published,
    topics=lambda settings: (settings.supplier_stats_topic,),
)

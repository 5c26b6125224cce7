"""Kafka `orders` -> Kafka `supplier-stats`: 5 s event-time windows per supplier (watermark 5 s).

    spark-submit spark/live_supplier_stats.py --bootstrap-servers ... --topic orders --value-schema '{...}' \
        --registry-url http://... --subject orders-value --output-topic supplier-stats \
        --checkpoint /path --report report.json

Windows are emitted once, when the watermark passes their end (append mode); invalid records are
left out here (the ingestion job dead-letters them), and so are records of a version registered after
the job started: it reads them from its next start.
"""

from __future__ import annotations

import argparse
import time

from pyspark.sql import DataFrame, SparkSession

from lineage_assets import topics
from lineage_assets.job_specs import LiveStatsReport
from spark import lineage, transforms
from spark.support import arguments, kafka_source, queries, reports


def parser() -> argparse.ArgumentParser:
    parser = arguments.streaming_arguments(__doc__)
    parser.add_argument("--output-topic", required=True)
    parser.add_argument("--window-seconds", type=int, default=5)
    parser.add_argument("--watermark-seconds", type=int, default=5)
    return parser


def written(decoded: DataFrame, args: argparse.Namespace) -> DataFrame:
    """The records the job writes to its topic from the source's ``decoded`` ones (``transforms.decode_orders``)."""
    stats = transforms.windowed_supplier_stats(
        transforms.valid_records(decoded), args.window_seconds, args.watermark_seconds
    )
    return transforms.supplier_stats_records(stats)


def column_lineage(records: DataFrame) -> dict:
    """The column lineage of ``records`` (``spark/lineage.observe``): the topic's columns are the
    fields of each record's JSON value."""
    return lineage.observe(records, expand="value")


def main() -> None:
    args = parser().parse_args()
    started = time.monotonic()
    spark = SparkSession.builder.getOrCreate()
    # One window state store per core the job has: every store is a task, a state file and a load in
    # each micro-batch, the one that only closes windows too. A checkpoint keeps the number it began with.
    spark.conf.set("spark.sql.shuffle.partitions", str(spark.sparkContext.defaultParallelism))

    versions = kafka_source.SourceVersions(args)
    source = kafka_source.kafka_source(spark, args)
    decoded = versions.observed(transforms.decode_orders(source, args.value_schema, versions.by_id))
    records = written(decoded, args)
    observed = reports.observed_lineage(args, column_lineage(records))
    writer = (
        records.writeStream.format("kafka")
        .outputMode("append")
        .options(**kafka_source.kafka_options(args))
        .option("topic", args.output_topic)
        .option("checkpointLocation", args.checkpoint)
    )
    # What the run wrote to its topic, the only writer of it: from the end it found to the end it left.
    output_start = {args.output_topic: topics.end_offsets(kafka_source.kafka_client(args), args.output_topic)}

    def offsets_written() -> dict:
        end = {args.output_topic: topics.end_offsets(kafka_source.kafka_client(args), args.output_topic)}
        return {"output_start_offsets": output_start, "output_end_offsets": end}

    query, summary = queries.run_query(writer, args, spark, versions, written=lambda batch_id: offsets_written())
    sink_rows = sum(p.sink.numOutputRows for p in query.recentProgress if p.sink and p.sink.numOutputRows > 0)
    reports.write_report(
        args.report,
        LiveStatsReport,
        started,
        **summary,
        windows_written=sink_rows,
        **offsets_written(),
        schema_versions=versions.summary(),
        column_lineage=observed,
    )
    spark.stop()


if __name__ == "__main__":
    main()

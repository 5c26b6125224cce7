"""Kafka `orders` -> Iceberg `orders` table, with invalid records sent to the dead-letter topic.

    spark-submit spark/ingest_orders.py --bootstrap-servers ... --topic orders --value-schema '{...}' \
        --registry-url http://... --subject orders-value --table lakehouse.`default`.orders --columns 'order_id string, ...' --dead-letter-topic orders-dlq \
        --checkpoint /path --report report.json [--mode catch-up|continuous]

Exactly once: each micro-batch commits one Iceberg snapshot tagged with the query's checkpoint and
the batch id; a batch replayed after a failure finds its snapshot and is not written again.

Records of a writer version the pipeline cannot read are dead-lettered (``schema_incompatible``),
never cast; a version registered while the job runs is judged when its first record arrives.
Records re-published by ``lineage-assets dlq replay`` (header ``REPLAY_HEADER``) are counted, so
the asset knows when every such dead letter is back.
"""

from __future__ import annotations

import time
from collections import Counter

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lineage_assets.dead_letters import REPLAY_HEADER
from lineage_assets.jobs import IngestionReport
from lineage_assets.source_schemas import SCHEMA_INCOMPATIBLE
from spark import jobs, transforms

QUERY_PROPERTY = "lineage-assets.checkpoint"
BATCH_PROPERTY = "lineage-assets.batch-id"
PARTITIONED_BY = "days(bid_time)"


def committed(spark: SparkSession, table: str, checkpoint: str, batch_id: int) -> bool:
    found = spark.sql(f"SELECT summary FROM {table}.snapshots").where(
        (F.col("summary")[QUERY_PROPERTY] == checkpoint) & (F.col("summary")[BATCH_PROPERTY] == str(batch_id))
    )
    return not found.isEmpty()


def main() -> None:
    parser = jobs.streaming_arguments(__doc__)
    parser.add_argument("--table", required=True, help="Iceberg table, as Spark SQL names it")
    parser.add_argument("--columns", required=True, help="the table's columns, as CREATE TABLE lists them")
    parser.add_argument("--dead-letter-topic", required=True)
    parser.add_argument("--job-name", default="iceberg-ingestion", help="recorded in dead letters")
    args = parser.parse_args()
    started = time.monotonic()
    spark = SparkSession.builder.getOrCreate()
    created = jobs.create_table(spark, args.table, args.columns, PARTITIONED_BY)
    totals = Counter()
    reasons = Counter()
    days: set[str] = set()
    versions = jobs.SourceVersions(args)

    def decode(batch):
        """The decoded batch, and the part of it that the table's rows and the outcomes need, cached by
        the pass that counts the records per writer version, outcome, replay and day. The cache leaves
        the record bytes out (half of the pass's CPU time): the dead letters, rare, are decoded again."""
        flagged = batch.withColumn("replayed", transforms.has_header("headers", REPLAY_HEADER))
        decoded = transforms.decode_orders(flagged, args.value_schema, versions.by_id, keep=("replayed",))
        kept = decoded.select(*transforms.ICEBERG_ORDER_COLUMNS, "schema_id", "dead_letter_reason", "replayed").persist()
        day = F.date_format("bid_time", "yyyy-MM-dd").alias("day")
        return decoded, kept, kept.groupBy("schema_id", "dead_letter_reason", "replayed", day).count().collect()

    # Only a run's first batch can be one that an earlier run wrote: Spark runs again the last batch
    # it planned without committing, and every later batch id is new. From a new checkpoint, none is.
    replay_possible = jobs.planned_batches(spark, args.checkpoint)

    def write_batch(batch, batch_id: int) -> None:
        nonlocal replay_possible
        decoded, kept, outcomes = decode(batch)
        try:
            if versions.refresh(row.schema_id for row in outcomes):  # registered since the job started
                kept.unpersist()
                decoded, kept, outcomes = decode(batch)
            replayed, replay_possible = replay_possible and committed(spark, args.table, args.checkpoint, batch_id), False
            if replayed:
                totals["batches_replayed"] += 1
                return
            valid = transforms.iceberg_orders(transforms.valid_orders(kept))
            dead = transforms.dead_letters(decoded)
            batch_reasons, by_version, returned, written, batch_days = Counter(), Counter(), 0, 0, set()
            for row in outcomes:
                if row.dead_letter_reason is not None:
                    batch_reasons[row.dead_letter_reason] += row["count"]
                else:
                    written += row["count"]
                    batch_days.add(row.day)
                    returned += row["count"] if row.replayed else 0
                if row.schema_id in versions.by_id:
                    by_version[row.schema_id] += row["count"]
            incompatible = sum(n for reason, n in batch_reasons.items() if reason.startswith(SCHEMA_INCOMPATIBLE))
            if written:
                (valid.writeTo(args.table)
                 .option(f"snapshot-property.{QUERY_PROPERTY}", args.checkpoint)
                 .option(f"snapshot-property.{BATCH_PROPERTY}", str(batch_id))
                 .append())
                days.update(batch_days)
            if batch_reasons:
                (transforms.dead_letter_records(dead, args.job_name).write.format("kafka")
                 .option("kafka.bootstrap.servers", args.bootstrap_servers)
                 .option("topic", args.dead_letter_topic).save())
            if args.progress_file and (written or batch_reasons):  # as soon as committed, for supervision
                jobs.append_progress(args.progress_file, {
                    "event": "committed", "batch": batch_id, "rows": written, "days": sorted(batch_days),
                    "dead_letters": sum(batch_reasons.values()), "schema_incompatible": incompatible,
                    "dead_letters_replayed": returned, "schema_versions": versions.summary(by_version),
                    # The table after this commit, for a deployment's lineage (a metadata read per commit;
                    # a catch-up run reports the table once, at its end).
                    **(jobs.table_state(spark, args.table) if written and args.mode == jobs.CONTINUOUS else {})})
            versions.batches[batch_id] = by_version
            totals["rows_written"] += written
            totals["dead_letters"] += sum(batch_reasons.values())
            totals["schema_incompatible"] += incompatible
            totals["dead_letters_replayed"] += returned
            reasons.update(batch_reasons)
        finally:
            kept.unpersist()

    source = jobs.kafka_source(spark, args.bootstrap_servers, args.topic, headers=True)
    writer = source.writeStream.foreachBatch(write_batch).option("checkpointLocation", args.checkpoint)
    query = jobs.run_query(writer, args, spark)
    table = jobs.table_state(spark, args.table)  # the whole table, from its manifests
    quality = table["quality"]
    jobs.write_report(
        args.report, IngestionReport, started, **jobs.progress_summary(query),
        rows_written=totals["rows_written"], dead_letters=totals["dead_letters"], dead_letter_reasons=dict(reasons),
        batches_replayed=totals["batches_replayed"], schema_incompatible=totals["schema_incompatible"],
        dead_letters_replayed=totals["dead_letters_replayed"], schema_versions=versions.summary(), days=sorted(days),
        table_created=created, snapshot_id=table["snapshot_id"], schema_id=table["schema_id"],
        # The manifests' count is exact without delete files (none here: the table is only appended to).
        table_rows=quality["rows"] if quality else spark.table(args.table).count(), quality=quality)
    spark.stop()


if __name__ == "__main__":
    main()

"""Kafka `suppliers` (compacted) -> Iceberg `suppliers` table: each supplier's current state, merged by key.

    spark-submit spark/ingest_suppliers.py --bootstrap-servers ... --topic suppliers --value-schema '{...}' \
        --registry-url http://... --subject suppliers-value --table lakehouse.`default`.suppliers \
        --columns 'supplier string, ...' --dead-letter-topic suppliers-dlq --checkpoint /path --report report.json

Each micro-batch keeps every supplier's latest valid record and merges it into the table: a new
supplier is inserted, a known one updated when the record's ``updated_at`` is later than the row's.
So a batch replayed after a failure, or a record older than the table's state, changes nothing, and
the table is the topic's compacted state whatever the order the records are read in. Invalid
records go to the dead-letter topic with their reason.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

from pyspark.sql import DataFrame, SparkSession

from lineage_assets.job_specs import SuppliersIngestionReport
from spark import lineage, transforms
from spark.support import arguments, kafka_source, queries, reports, tables

CHANGES_VIEW = "supplier_changes"


def parser() -> argparse.ArgumentParser:
    parser = arguments.streaming_arguments(__doc__)
    parser.add_argument("--table", required=True, help="Iceberg table, as Spark SQL names it")
    parser.add_argument("--columns", required=True, help="the table's columns, as CREATE TABLE lists them")
    parser.add_argument("--dead-letter-topic", required=True)
    parser.add_argument("--job-name", default="suppliers-ingestion", help="recorded in dead letters")
    return parser


def written(decoded: DataFrame) -> DataFrame:
    """The rows a batch merges into the table, from its ``decoded`` records (``SupplierDecoder``)."""
    return transforms.current_suppliers(transforms.valid_records(decoded))


def column_lineage(rows: DataFrame, batch: DataFrame, args: argparse.Namespace) -> dict:
    """The column lineage of a micro-batch's ``rows`` (``spark/lineage.observe``): the ``batch`` read
    is the source's records, which its plan does not name."""
    return lineage.observe(rows, {f"kafka:{args.topic}": batch})


def merge(rows: DataFrame, table: str) -> None:
    """Merge ``rows`` into ``table`` by supplier; a row no later than the table's changes nothing."""
    rows.createOrReplaceTempView(CHANGES_VIEW)
    rows.sparkSession.sql(f"""
        MERGE INTO {table} t USING {CHANGES_VIEW} s ON t.supplier = s.supplier
        WHEN MATCHED AND s.updated_at > t.updated_at THEN UPDATE SET *
        WHEN NOT MATCHED THEN INSERT *""")


def main() -> None:
    args = parser().parse_args()
    started = time.monotonic()
    spark = SparkSession.builder.getOrCreate()
    created = tables.create_table(spark, args.table, args.columns)
    parent_snapshot_id = tables.current_snapshot_id(spark, args.table)  # what the run's first commit builds on
    versions = kafka_source.SourceVersions(args)
    decoder = transforms.SupplierDecoder(args.value_schema, versions.by_id)
    totals: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    observed: dict[str, dict] = {}
    records_read: dict[int, int] = {}

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        nonlocal decoder
        if versions.refresh() is None and versions.by_id != decoder.versions:
            decoder = transforms.SupplierDecoder(args.value_schema, versions.by_id)
        decoded = decoder(batch).persist()
        try:
            rows = written(decoded)
            if "lineage" not in observed:  # a micro-batch's rows are the source's records: the plan does not name them
                observed["lineage"] = reports.observed_lineage(args, column_lineage(rows, batch, args))
            # One pass over the batch for its outcomes and the writer versions it holds.
            batch_reasons: Counter[str] = Counter()
            by_version: Counter[int] = Counter()
            records_read[batch_id] = 0
            for row in decoded.groupBy("dead_letter_reason", "schema_id").count().collect():
                records_read[batch_id] += row["count"]
                if row.dead_letter_reason:
                    batch_reasons[row.dead_letter_reason] += row["count"]
                if row.schema_id:
                    by_version[row.schema_id] += row["count"]
            changes = rows.count()
            if changes:
                merge(rows, args.table)
            if batch_reasons:
                (
                    transforms.dead_letter_records(transforms.dead_letters(decoded), args.job_name)
                    .write.format("kafka")
                    .options(**kafka_source.kafka_options(args))
                    .option("topic", args.dead_letter_topic)
                    .save()
                )
            versions.batches[batch_id] = by_version
        finally:
            decoded.unpersist()
        totals["rows_written"] += changes
        totals["dead_letters"] += sum(batch_reasons.values())
        reasons.update(batch_reasons)

    source = kafka_source.kafka_source(spark, args)
    writer = source.writeStream.foreachBatch(write_batch).option("checkpointLocation", args.checkpoint)
    _, summary = queries.run_query(writer, args, spark, read=records_read)
    table = tables.table_state(spark, args.table)
    reports.write_report(
        args.report,
        SuppliersIngestionReport,
        started,
        **summary,
        rows_written=totals["rows_written"],
        dead_letters=totals["dead_letters"],
        dead_letter_reasons=dict(reasons),
        schema_versions=versions.summary(),
        column_lineage=observed.get("lineage"),
        table_created=created,
        snapshot_id=table["snapshot_id"],
        parent_snapshot_id=parent_snapshot_id,
        schema_id=table["schema_id"],
        # The manifests' count is exact without delete files (none: a merge copies the files it changes on write).
        table_rows=table["quality"]["rows"] if table["quality"] else 0,
        quality=table["quality"],
    )
    spark.stop()


if __name__ == "__main__":
    main()

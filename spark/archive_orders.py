"""Kafka `orders` -> raw archive: JSON files under s3://archive/orders/date=.../hour=.../.

    spark-submit spark/archive_orders.py --bootstrap-servers ... --topic orders --value-schema '{...}' \
        --registry-url http://... --subject orders-value --path s3://archive/orders \
        --checkpoint /path --report report.json

Every record is archived, valid or not, with its value bytes unchanged and its writer schema id (so
fields a newer version adds are kept too). Spark's file sink keeps a
log of committed files next to the data (`_spark_metadata`), so each record is in the archive once
even when a batch is retried; readers that go through Spark see exactly the committed files.
"""

from __future__ import annotations

import argparse
import time

from pyspark.sql import DataFrame, SparkSession

from lineage_assets.job_specs import ArchiveReport
from spark import lineage, transforms
from spark.support import arguments, kafka_source, quality, queries, reports, tables


def parser() -> argparse.ArgumentParser:
    parser = arguments.streaming_arguments(__doc__)
    parser.add_argument("--path", required=True, help="archive location, e.g. s3://archive/orders")
    return parser


def written(decoded: DataFrame) -> DataFrame:
    """What the job writes of the source's ``decoded`` records (``transforms.decode_orders``)."""
    return transforms.archive_records(decoded)


def column_lineage(records: DataFrame) -> dict:
    """The column lineage of ``records`` (``spark/lineage.observe``)."""
    return lineage.observe(records)


def main() -> None:
    args = parser().parse_args()
    started = time.monotonic()
    spark = SparkSession.builder.getOrCreate()
    before = tables.files_under(spark, args.path)

    versions = kafka_source.SourceVersions(args)
    columns = quality.ColumnMetrics()
    source = kafka_source.kafka_source(spark, args)
    decoded = versions.observed(transforms.decode_orders(source, args.value_schema, versions.by_id))
    records = columns.observed(written(decoded))
    observed = reports.observed_lineage(args, column_lineage(records))
    writer = (
        records.writeStream.format("json")
        .partitionBy("date", "hour")
        .option("path", args.path)
        .option("checkpointLocation", args.checkpoint)
    )
    reported = set(before)

    def files_added(batch_id: int) -> dict:
        """The files a batch added, for a deployment's lineage as it runs."""
        added = {
            path: size for path, size in tables.sink_files(spark, args.path, batch_id).items() if path not in reported
        }
        reported.update(added)
        return {"files_added": sorted([path, size] for path, size in added.items())}

    _, summary = queries.run_query(writer, args, spark, versions, columns, written=files_added)

    after = tables.files_under(spark, args.path)
    added = sorted(set(after) - set(before))
    rows, files, size = summary["rows_in"], len(added), sum(after[path] for path in added)
    reports.write_report(
        args.report,
        ArchiveReport,
        started,
        **summary,
        rows_written=rows,
        files_written=files,
        bytes_written=size,
        files_total=len(after),
        files_added=[[path, after[path]] for path in added],
        schema_versions=versions.summary(),
        column_lineage=observed,
        # Of the records this run archived: the sink keeps no statistics of its files to read.
        quality=reports.quality_entry(rows, size, files, columns.summary()),
    )
    spark.stop()


if __name__ == "__main__":
    main()

"""Kafka `orders` -> Iceberg `orders` table, with invalid records sent to the dead-letter topic.

    spark-submit spark/ingest_orders.py --bootstrap-servers ... --topic orders --value-schema '{...}' \
        --registry-url http://... --subject orders-value --table lakehouse.`default`.orders \
        --columns 'order_id string, ...' --dead-letter-topic orders-dlq \
        --checkpoint /path --report report.json [--mode catch-up|continuous]

Exactly once: each micro-batch commits one Iceberg snapshot tagged with the query's checkpoint and
the batch id; a batch replayed after a failure finds its snapshot and is not written again.

Records of a writer version the pipeline cannot read are dead-lettered (``schema_incompatible``),
never cast; the registry is asked for the versions at each micro-batch, so a version registered
while the job runs is judged in the first batch that carries its records.
Records re-published by ``lineage-assets dlq replay`` (header ``REPLAY_HEADER``) are counted, so
the asset knows when every such dead letter is back.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Mapping

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from lineage_assets.dead_letters import REPLAY_HEADER
from lineage_assets.job_specs import IngestionReport
from lineage_assets.source_schemas import SCHEMA_INCOMPATIBLE, WriterVersion
from spark import lineage, transforms
from spark.support import arguments, kafka_source, quality, queries, reports, tables

QUERY_PROPERTY = "lineage-assets.checkpoint"
BATCH_PROPERTY = "lineage-assets.batch-id"
PARTITIONED_BY = "days(bid_time)"
# Each task writes the days of its own records, with no shuffle to one writer per day: a batch
# leaves a file per day and Kafka partition, and writes with every core. Table properties, so that
# the table's owner may choose otherwise (`write.distribution-mode`).
WRITE_PROPERTIES = {"write.distribution-mode": "none", "write.spark.fanout.enabled": "true"}


def committed(spark: SparkSession, table: str, checkpoint: str, batch_id: int) -> bool:
    found = spark.sql(f"SELECT summary FROM {table}.snapshots").where(
        (F.col("summary")[QUERY_PROPERTY] == checkpoint) & (F.col("summary")[BATCH_PROPERTY] == str(batch_id))
    )
    return not found.isEmpty()


class CommittedTable:
    """The table after each commit of a continuous run, as a deployment's lineage reports it: its
    snapshot, schema id and ``quality``. Read whole from the manifests once, before the query; a
    commit whose snapshot follows the last one read is added to that from its summary and the
    metrics observed as its records were written, so no commit scans the table's metadata again
    (0.5 s of a continuous micro-batch of about 1.5 s, and growing with the table)."""

    totals: dict  # the table's ``quality.files_totals`` as of ``snapshot_id``, and its columns
    columns: list[str]

    def __init__(self, spark: SparkSession, table: str):
        self.table = table
        self.snapshot_id = self._read(spark, self._current(spark).currentSnapshot())

    def after_commit(self, session: SparkSession, appended: dict) -> dict:
        """``tables.table_state`` just after a commit, through the committing ``session`` (its catalog
        holds the table as the commit left it); ``appended``: the commit's ``column_aggregates``."""
        iceberg = self._current(session)
        snapshot = iceberg.currentSnapshot()
        if snapshot.parentId() == self.snapshot_id and {key.rsplit(":", 1)[0] for key in appended} <= set(self.columns):
            self.totals = quality.totals_after_append(self.totals, dict(snapshot.summary()), appended)
            self.snapshot_id = snapshot.snapshotId()
        else:  # another writer committed in between (or the batch wrote columns the table had not)
            self.snapshot_id = self._read(session, snapshot)
        return {
            "snapshot_id": self.snapshot_id,
            "schema_id": iceberg.schema().schemaId(),
            "quality": quality.table_quality_entry(self.totals, self.columns),
        }

    def _current(self, session: SparkSession):
        """The Iceberg table as ``session``'s catalog has it."""
        return tables.iceberg_table(session, self.table)

    def _read(self, session: SparkSession, snapshot) -> int | None:
        """Read the totals of ``snapshot`` (None: the table has none yet) from its manifests; its id."""
        snapshot_id = snapshot.snapshotId() if snapshot is not None else None
        self.totals, self.columns = tables.table_totals(session, self.table, snapshot_id)
        return snapshot_id


class BatchPlan:
    """What each micro-batch's plan is built from, for one set of writer versions: the decoder, the
    replay flag and the outcomes counted as the batch is written. Made again only when the registry's
    versions change: building the columns takes hundreds of calls into the JVM (0.2 to 0.35 s of a
    continuous deployment's micro-batch of about 1.7 s)."""

    def __init__(self, reader_schema: str, versions: Mapping[int, WriterVersion], columns: dict[str, bool]):
        self.decoder = transforms.OrderDecoder(reader_schema, versions)
        self.replayed = transforms.has_header("headers", REPLAY_HEADER)
        valid = F.col("dead_letter_reason").isNull()
        self.outcomes = (
            F.count_if(valid).alias("written"),
            F.count_if(valid & F.col("replayed")).alias("returned"),
            F.count_if(~valid).alias("dead_letters"),
            # Dates collected, formatted once per batch; joined: a set comes back from an observation
            # as a Java object.
            F.array_join(
                F.array_sort(F.collect_set(F.when(valid, F.to_date("bid_time")))).cast("array<string>"), ","
            ).alias("days"),
            *[F.count_if(F.col("schema_id") == schema_id).alias(str(schema_id)) for schema_id in versions],
        )
        # The metrics of the written ``columns`` (whether each is numeric; none: no metrics), for ``CommittedTable``.
        self.column_metrics = quality.column_aggregates(columns, where=valid)
        self.outcomes += tuple(self.column_metrics.values())
        self.lineage: dict | None = None  # of the rows written, observed in the first batch's plan

    def rows(self, batch: DataFrame, observation: Observation) -> DataFrame:
        """The batch's rows of the table, its outcomes counted as they are written."""
        return transforms.iceberg_orders(transforms.valid_records(self.observed(self.decode(batch), observation)))

    def decode(self, batch: DataFrame) -> DataFrame:
        return self.decoder(batch.withColumn("replayed", self.replayed), keep=("replayed",))

    def observed(self, decoded: DataFrame, observation: Observation) -> DataFrame:
        """``decoded`` with the batch's outcomes counted as the write reads it: one pass over the
        records. The observation also keeps the validity filter above the decoding (pushed below
        it, the filter would decode each record again for every field the reason reads)."""
        # Only the columns written and counted: the rest of each record is not copied along.
        needed = decoded.select(*transforms.ICEBERG_ORDER_COLUMNS, "schema_id", "dead_letter_reason", "replayed")
        return needed.observe(observation, *self.outcomes)


def parser() -> argparse.ArgumentParser:
    parser = arguments.streaming_arguments(__doc__)
    parser.add_argument("--table", required=True, help="Iceberg table, as Spark SQL names it")
    parser.add_argument("--columns", required=True, help="the table's columns, as CREATE TABLE lists them")
    parser.add_argument("--dead-letter-topic", required=True)
    parser.add_argument("--job-name", default="iceberg-ingestion", help="recorded in dead letters")
    return parser


def column_lineage(rows: DataFrame, batch: DataFrame, args: argparse.Namespace) -> dict:
    """The column lineage of a micro-batch's ``rows`` (``spark/lineage.observe``): the ``batch`` read
    is the source's records, which its plan does not name."""
    return lineage.observe(rows, {f"kafka:{args.topic}": batch})


def main() -> None:
    args = parser().parse_args()
    started = time.monotonic()
    spark = SparkSession.builder.getOrCreate()
    created = tables.create_table(spark, args.table, args.columns, PARTITIONED_BY, WRITE_PROPERTIES)
    parent_snapshot_id = tables.current_snapshot_id(spark, args.table)  # what the run's first commit builds on
    parent = {
        "parent_snapshot_id": parent_snapshot_id,
        "parent_data_snapshot_id": tables.data_snapshot_id(spark, args.table, parent_snapshot_id),
    }
    totals: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    days: set[str] = set()
    versions = kafka_source.SourceVersions(args)
    committed_table = (
        CommittedTable(spark, args.table) if args.progress_file and args.mode == arguments.CONTINUOUS else None
    )
    # The written columns' metrics are observed only for a CommittedTable: a catch-up run does without.
    columns = (
        quality.numeric_columns(spark.table(args.table).schema, transforms.ICEBERG_ORDER_COLUMNS)
        if committed_table
        else {}
    )
    plan = BatchPlan(args.value_schema, versions.by_id, columns)

    def send_dead_letters(decoded, batch_id: int) -> Counter[str]:
        """The batch's dead letters to their topic (decoded again: they are rare); their reasons counted."""
        observation = Observation(f"dead-letters-{batch_id}")  # here only to keep the filter above the decoding
        dead = transforms.dead_letters(decoded.observe(observation, F.count(F.lit(1)).alias("records"))).persist()
        try:
            reasons = Counter(
                {row.dead_letter_reason: row["count"] for row in dead.groupBy("dead_letter_reason").count().collect()}
            )
            (
                transforms.dead_letter_records(dead, args.job_name)
                .write.format("kafka")
                .options(**kafka_source.kafka_options(args))
                .option("topic", args.dead_letter_topic)
                .save()
            )
        finally:
            dead.unpersist()
        return reasons

    # Only a run's first batch can be one that an earlier run wrote: Spark runs again the last batch
    # it planned without committing, and every later batch id is new. From a new checkpoint, none is.
    replay_possible = tables.planned_batches(spark, args.checkpoint)
    observed: dict[str, dict] = {}
    records_read: dict[int, int] = {}  # by batch id: every record of a batch is written or a dead letter

    def write_batch(batch, batch_id: int) -> None:
        nonlocal replay_possible, plan
        replayed, replay_possible = replay_possible and committed(spark, args.table, args.checkpoint, batch_id), False
        if replayed:
            totals["batches_replayed"] += 1
            return
        if (error := versions.refresh()) is not None:
            print(f"{args.job_name}: batch {batch_id} is read with the versions known before: {error}", file=sys.stderr)
        elif versions.by_id != plan.decoder.versions:
            plan = BatchPlan(args.value_schema, versions.by_id, columns)
        outcomes = Observation(f"outcomes-{batch_id}")
        rows = plan.rows(batch, outcomes)
        if plan.lineage is None:  # a micro-batch's rows are the source's records: the plan does not name them
            plan.lineage = observed["lineage"] = reports.observed_lineage(args, column_lineage(rows, batch, args))
        # Every batch commits a snapshot, an empty one when all its records are dead letters: the
        # snapshot tells a replay of the batch that it is done.
        (
            rows.writeTo(args.table)
            .option(f"snapshot-property.{QUERY_PROPERTY}", args.checkpoint)
            .option(f"snapshot-property.{BATCH_PROPERTY}", str(batch_id))
            .append()
        )
        seen = outcomes.get
        written, returned = seen["written"], seen["returned"]
        records_read[batch_id] = written + seen["dead_letters"]
        # The table after this commit, for a deployment's lineage; an empty commit too, which the next
        # one follows (a catch-up run reports the table once, at its end).
        table_after = (
            committed_table.after_commit(batch.sparkSession, {key: seen[key] for key in plan.column_metrics})
            if committed_table
            else {}
        )
        batch_days = [day for day in seen["days"].split(",") if day]
        by_version = Counter({schema_id: seen[str(schema_id)] for schema_id in versions.by_id if seen[str(schema_id)]})
        batch_reasons = send_dead_letters(plan.decode(batch), batch_id) if seen["dead_letters"] else Counter()
        incompatible = sum(n for reason, n in batch_reasons.items() if reason.startswith(SCHEMA_INCOMPATIBLE))
        days.update(batch_days)
        if args.progress_file and (written or batch_reasons):  # as soon as committed, for supervision
            reports.append_progress(
                args.progress_file,
                {
                    "event": "committed",
                    "batch": batch_id,
                    "rows": written,
                    "days": batch_days,
                    "dead_letters": sum(batch_reasons.values()),
                    "schema_incompatible": incompatible,
                    "dead_letters_replayed": returned,
                    "schema_versions": versions.summary(by_version),
                    **({**table_after, **parent} if written and table_after else {}),
                },
            )
        versions.batches[batch_id] = by_version
        totals["rows_written"] += written
        totals["dead_letters"] += sum(batch_reasons.values())
        totals["schema_incompatible"] += incompatible
        totals["dead_letters_replayed"] += returned
        reasons.update(batch_reasons)

    source = kafka_source.kafka_source(spark, args, headers=True)
    writer = source.writeStream.foreachBatch(write_batch).option("checkpointLocation", args.checkpoint)
    _, summary = queries.run_query(writer, args, spark, read=records_read)
    table = tables.table_state(spark, args.table)  # the whole table, from its manifests
    table_quality = table["quality"]
    reports.write_report(
        args.report,
        IngestionReport,
        started,
        **summary,
        rows_written=totals["rows_written"],
        dead_letters=totals["dead_letters"],
        dead_letter_reasons=dict(reasons),
        batches_replayed=totals["batches_replayed"],
        schema_incompatible=totals["schema_incompatible"],
        dead_letters_replayed=totals["dead_letters_replayed"],
        schema_versions=versions.summary(),
        days=sorted(days),
        column_lineage=observed.get("lineage"),
        table_created=created,
        snapshot_id=table["snapshot_id"],
        **parent,
        schema_id=table["schema_id"],
        # The manifests' count is exact without delete files (none here: the table is only appended to).
        table_rows=table_quality["rows"] if table_quality else spark.table(args.table).count(),
        quality=table_quality,
    )
    spark.stop()


if __name__ == "__main__":
    main()

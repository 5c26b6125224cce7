"""The Kafka source of a streaming job and the registered writer versions of its values."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from confluent_kafka.schema_registry import SchemaRegistryClient
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lineage_assets.connections import (
    LibrdkafkaConf,
    librdkafka_conf,
    read_kafka_properties,
    registry_conf,
    spark_kafka_options,
)
from lineage_assets.source_schemas import RegistryError, registered_versions


def client_properties(args: argparse.Namespace) -> dict[str, str]:
    """The Kafka client properties file the job was given ({} for a plaintext Kafka)."""
    return read_kafka_properties(Path(args.kafka_properties)) if args.kafka_properties else {}


def kafka_options(args: argparse.Namespace) -> dict[str, str]:
    """Spark's ``kafka.`` options of the job's Kafka, its security included."""
    return spark_kafka_options(client_properties(args), args.bootstrap_servers)


def kafka_client(args: argparse.Namespace) -> LibrdkafkaConf:
    """confluent-kafka's configuration of the job's Kafka."""
    return librdkafka_conf(client_properties(args), args.bootstrap_servers)


def registry_client(args: argparse.Namespace) -> dict[str, str]:
    """confluent-kafka's registry client configuration of the job's registry."""
    return registry_conf(args.registry_url, client_properties(args), args.ca_file)


class SourceVersions:
    """The registered writer versions of the source's values, judged against the reader schema, and
    the records read of each. ``refresh`` looks them up again, so a deployment reads a version
    registered after it started without a restart."""

    OBSERVATION = "schema_versions"  # the name of the per-batch counts observed on a streaming query

    def __init__(self, args: argparse.Namespace):
        self.registry, self.subject, self.reader_schema = registry_client(args), args.subject, args.value_schema
        # One client for every refresh: it keeps its connection and the versions it has read, so a
        # micro-batch makes one request, not a new connection's several.
        self.client = SchemaRegistryClient(self.registry)
        self.by_id = registered_versions(self.registry, self.subject, self.reader_schema, self.client)
        self.batches: dict[int, Counter[int]] = {}  # batch id -> records per schema id (a replayed batch counts once)

    def refresh(self) -> RegistryError | None:
        """Look the registry up again. Asked once a batch's offsets are planned, it knows every version
        of the batch's records: a producer registers a version before it sends a record of it. When
        the registry does not answer, the known versions stay and the error is returned (a record of
        another version is then dead-lettered as an unexpected id, to be replayed)."""
        try:
            self.by_id = registered_versions(self.registry, self.subject, self.reader_schema, self.client)
        except RegistryError as error:
            return error
        return None

    def observed(self, decoded: DataFrame) -> DataFrame:
        """``decoded`` with its records per known version counted in each batch's progress."""
        counts = [F.count_if(F.col("schema_id") == schema_id).alias(str(schema_id)) for schema_id in self.by_id]
        return decoded.observe(self.OBSERVATION, *(counts or [F.count(F.lit(1)).alias("records")]))

    def observed_in(self, progress) -> Counter[int]:
        """Records per schema id that one progress report observed (none when the query observes nothing)."""
        metrics = (progress.observedMetrics or {}).get(self.OBSERVATION)
        return Counter(
            {
                int(name): count
                for name, count in (metrics.asDict() if metrics else {}).items()
                if name.isdigit() and count
            }
        )

    def count_observed(self, progress) -> None:
        if (progress.observedMetrics or {}).get(self.OBSERVATION) is not None:
            self.batches[progress.batchId] = self.observed_in(progress)

    @property
    def records(self) -> Counter[int]:
        return sum(self.batches.values(), Counter())

    def summary(self, records: Counter[int] | None = None) -> list[dict]:
        """Each version read (records > 0, all batches unless ``records``): version, id, records,
        readable and why not, its fields."""
        records = self.records if records is None else records
        return [
            {
                "version": v.version,
                "schema_id": v.schema_id,
                "records": records[i],
                "readable": v.readable,
                "problems": list(v.problems),
                "fields": [list(f) for f in v.fields()],
            }
            for i, v in sorted(self.by_id.items(), key=lambda item: item[1].version)
            if records[i]
        ]


# Records a Kafka poll may return. After every poll, Spark's Kafka reader asks the broker for the
# partition's first and last offsets (two round trips) and seeks back, which also drops the consumer's
# prefetched data: at Kafka's default of 500 records a poll, 4,000 round trips per million records.
RECORDS_PER_POLL = 60_000
# Bytes a fetch may return of one partition. Kafka's default, 1 MiB, would end a poll at about 8,000
# orders whatever RECORDS_PER_POLL allows.
PARTITION_FETCH_BYTES = 8 * 1024 * 1024


# How long the broker may hold a fetch for new records. After each poll the consumer already has the
# next fetch waiting at the broker; at the topic's end (the last poll of a catch-up run, every batch
# of a live deployment) Spark's offset lookup would queue behind it for Kafka's default 500 ms.
FETCH_MAX_WAIT_MS = 10


def kafka_source(spark: SparkSession, args: argparse.Namespace, headers: bool = False) -> DataFrame:
    """The source topic of the job's arguments, from its first offset, in batches of at most
    ``--max-records-per-batch`` records (a catch-up run then takes several)."""
    reader = spark.readStream.format("kafka")
    if args.max_records_per_batch:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_records_per_batch))
    return (
        reader.options(**kafka_options(args))
        .option("subscribe", args.topic)
        .option("startingOffsets", "earliest")
        # A deleted or compacted range must not silently skip records in a lineage-tracked job.
        .option("failOnDataLoss", "true")
        .option("includeHeaders", str(headers).lower())
        .option("kafka.max.poll.records", str(RECORDS_PER_POLL))
        .option("kafka.max.partition.fetch.bytes", str(PARTITION_FETCH_BYTES))
        .option("kafka.fetch.max.wait.ms", str(FETCH_MAX_WAIT_MS))
        .load()
    )

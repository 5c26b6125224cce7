"""Kafka Connect peers of the throughput benchmark: Apache Kafka's Connect runtime in distributed
mode, one worker, running a sink connector over the bench topic beside the project's job.

The worker (``make connect-peer``: ``.cache/jars/kafka-connect/worker``, the broker's Kafka version)
runs as a JVM of its own, one per round, on fresh internal topics; its plugins are the folders of
``.cache/jars/kafka-connect/plugins`` (Connect's ``plugin.path``). A round creates the connector
through the worker's REST API, waits until what it wrote holds the whole topic, and stops the worker.
Like the Flink peers' net runtime, a rate leaves out the JVM's start: its clock starts when the
worker accepts the connector.

- ``IcebergSinkRounds``: Apache Iceberg's sink into a table of ``lakehouse/orders``' schema and
  partitioning on the stack's REST catalog, the records read with Apicurio's Avro converter through
  the stack's registry. Catch-up: orders over the time from the connector's start to the commit that
  holds them all. Continuous: the warm rate of its commits (``iceberg_tables.warm_rate``).
- ``S3SinkRounds``: Apache Camel's S3 sink (Camel Kafka Connector's ``CamelSinkConnector`` over
  Camel's ``aws2-s3`` component in streaming upload mode) into the archive's bucket, each task
  writing the records' value bytes as they are, a fixed number of records per object. Catch-up:
  orders over the time from the connector's start to the listing that holds all their bytes.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import fastavro
from confluent_kafka import OFFSET_BEGINNING, Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import DayTransform
from pyiceberg.types import DecimalType, IcebergType, NestedField, StringType, TimestampType

from bench import iceberg_tables
from bench.flink_peer import check_table
from lineage_assets.connections import s3_client
from lineage_assets.datasets import LAKEHOUSE_ORDERS, ORDERS_AVRO_SCHEMA
from lineage_assets.resources.kafka import KafkaResource
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.settings import Settings
from lineage_assets.stack.probes import http_ok, port_open
from lineage_assets.stack.services.base import CONF_DIR, java
from lineage_assets.stack.services.storage import s3proxy_command, s3proxy_properties

ICEBERG_TABLE = "bench_connect_orders"
# Camel's aws2-s3 at Camel 3.11 has no path-style option: it addresses a bucket as <bucket>.<host>. The
# stack's s3proxy serves path-style only (with a virtual host it would read every other host name as a
# bucket), so the S3 sink writes through a second s3proxy over the same blobs that serves buckets as
# <bucket>.localhost, names the worker's JVM resolves through a hosts file of its own.
S3_VIRTUAL_HOST = "localhost"
S3_PREFIX = "bench-connect-archive"  # + the round: the S3 sink's objects in the archive's bucket
STREAMING_TIMER_OFF_MS = 3_600_000
# Camel's streaming upload numbers an object's part by the object's record count, and S3 numbers parts
# up to 10,000: larger objects fail.
MAX_RECORDS_PER_OBJECT = 10_000
# How often the S3 sink's worker commits its tasks' offsets, which say when the sink has read the topic.
S3_OFFSET_FLUSH_MS = 200
# The catch-up sink's commit interval: short, so that the commit holding the last order comes at most
# a second after it is written (the default, 5 minutes, would be most of the measure).
CATCH_UP_COMMIT_MS = 1000
CONNECT_TOPIC_PREFIX = "bench-connect-"  # + a time: each worker's internal topics and each sink's control topic
# The catalog's column types as Iceberg's: the table the sink writes is lakehouse/orders' own.
ICEBERG_TYPES: dict[str, IcebergType] = {
    "string": StringType(),
    "decimal(10,2)": DecimalType(10, 2),
    "timestamp_ntz": TimestampType(),
}


def rest_port(settings: Settings) -> int:
    """The worker's REST port: beside the registry's, as Connect's default 8083 is beside the Confluent
    registry's 8081, so that it moves with the stack's port offset (the bench stack's 28683)."""
    return settings.registry_port + 2


def virtual_host_s3_port(settings: Settings) -> int:
    """The second s3proxy's port: beside the worker's."""
    return rest_port(settings) + 1


def jars(settings: Settings) -> Path:
    folder = settings.jars_dir / "kafka-connect"
    if not any((folder / "worker").glob("*.jar")) or not any((folder / "plugins").glob("*/*.jar")):
        raise RuntimeError(f"the Kafka Connect peer is not installed ({folder}): run `make connect-peer`")
    return folder


class RestError(RuntimeError):
    """The worker's REST API answered with an error."""

    def __init__(self, method: str, path: str, code: int, message: str):
        super().__init__(f"{method} {path}: {code} {message}")
        self.code = code


class Worker:
    """One Kafka Connect worker in distributed mode, a process of its own logging to ``log``, in a
    group of its own with internal topics of its own (deleted at its stop)."""

    def __init__(
        self, settings: Settings, folder: Path, log: Path, hosts: Iterable[str] = (), offset_flush_ms: int = 1000
    ):
        self.settings, self.folder, self.log = settings, folder, log
        self.hosts = tuple(hosts)  # names the worker's JVM resolves to the stack's interface
        self.offset_flush_ms = offset_flush_ms
        self.group = f"{CONNECT_TOPIC_PREFIX}{time.time_ns()}"
        self.url = f"http://{settings.host}:{rest_port(settings)}"
        self.process: subprocess.Popen | None = None

    def properties(self) -> dict[str, str]:
        return {
            "bootstrap.servers": self.settings.kafka_servers,
            "group.id": self.group,
            **{f"{kind}.storage.topic": f"{self.group}-{kind}" for kind in ("config", "offset", "status")},
            **{f"{kind}.storage.replication.factor": "1" for kind in ("config", "offset", "status")},
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
            "listeners": self.url,
            "rest.advertised.host.name": self.settings.host,
            "plugin.path": str(jars(self.settings) / "plugins"),
            # Apicurio's converter declares no service manifest: plugins are found by scanning.
            "plugin.discovery": "only_scan",
            # A sink task idle at the topic's end polls for this long before Connect calls its put(),
            # the only place Iceberg's sink answers its coordinator: at the default (60 s) its commits wait.
            "offset.flush.interval.ms": str(self.offset_flush_ms),
        }

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def failure(self) -> str:
        tail = "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])
        return f"the Kafka Connect worker (exit {self.process and self.process.poll()}); log: {self.log}\n{tail}"

    def start(self, timeout_s: float = 180) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        config = self.folder / "worker.properties"
        config.write_text("".join(f"{key}={value}\n" for key, value in self.properties().items()))
        resolving: list[str] = []
        if self.hosts:
            # The file replaces the machine's resolver for this JVM: the machine's own name stays in it.
            hosts_file = self.folder / "hosts"
            hosts_file.write_text(f"{self.settings.host} {' '.join(self.hosts)} {socket.gethostname()}\n")
            resolving = [f"-Djdk.net.hosts.file={hosts_file}"]
        command = [
            java(),
            "-Xms256m",
            "-Xmx1g",
            *resolving,
            f"-Dlog4j2.configurationFile={CONF_DIR / 'jvm-log4j2.properties'}",
            "-cp",
            f"{jars(self.settings) / 'worker'}/*",
            "org.apache.kafka.connect.cli.ConnectDistributed",
            str(config),
        ]
        # s3proxy rejects the AWS SDK's default flexible-checksum headers (as for the stack's catalog).
        environment = {
            **os.environ,
            "AWS_REQUEST_CHECKSUM_CALCULATION": "WHEN_REQUIRED",
            "AWS_RESPONSE_CHECKSUM_VALIDATION": "WHEN_REQUIRED",
        }
        with self.log.open("w") as written:
            self.process = subprocess.Popen(command, stdout=written, stderr=subprocess.STDOUT, env=environment)
        deadline = time.monotonic() + timeout_s
        while not http_ok(f"{self.url}/connectors"):
            if not self.running() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.failure()}\ndid not answer within {timeout_s} s")
            time.sleep(0.5)

    def request(self, method: str, path: str, body: Mapping[str, object] | None = None) -> dict:
        """A call of the worker's REST API; its JSON answer ({} for none)."""
        request = urllib.request.Request(
            f"{self.url}{path}",
            method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                text = response.read()
        except urllib.error.HTTPError as error:
            raise RestError(method, path, error.code, error.read().decode(errors="replace")) from None
        return json.loads(text) if text else {}

    def create(self, name: str, config: Mapping[str, str]) -> float:
        """Create the connector; returns the time (epoch seconds) the worker accepted it."""
        self.request("POST", "/connectors", {"name": name, "config": dict(config)})
        return time.time()

    def failed(self, name: str) -> str | None:
        """Why the connector or one of its tasks failed (its trace); None while none has."""
        try:
            status = self.request("GET", f"/connectors/{name}/status")
        except RestError as error:
            if error.code == 404:  # no status yet: the connector is starting
                return None
            raise
        for part in [status["connector"], *status["tasks"]]:
            if part["state"] == "FAILED":
                return part.get("trace", "FAILED")
        return None

    def healthy(self, name: str) -> Callable[[], bool]:
        """A check for ``iceberg_tables.await_rows``: the worker runs and the connector has not failed."""

        def check() -> bool:
            if not self.running():
                return False
            if (trace := self.failed(name)) is not None:
                raise RuntimeError(f"the connector {name} failed; log: {self.log}\n{trace}")
            return True

        return check

    def stop(self) -> None:
        """Stop the worker (if it runs) and delete its internal topics."""
        if self.running():
            assert self.process is not None
            self.process.terminate()
            self.process.wait(timeout=60)
        delete_topics(self.settings, self.group)


def delete_topics(settings: Settings, prefix: str) -> None:
    """Delete the topics whose names start with ``prefix``."""
    admin = AdminClient({"bootstrap.servers": settings.kafka_servers})
    topics = [topic for topic in admin.list_topics(timeout=10).topics if topic.startswith(prefix)]
    for future in admin.delete_topics(topics).values() if topics else ():
        future.result(timeout=30)


@contextmanager
def worker(
    settings: Settings, folder: Path, log: Path, hosts: Iterable[str] = (), offset_flush_ms: int = 1000
) -> Iterator[Worker]:
    """A started worker, stopped at the end."""
    running = Worker(settings, folder, log, hosts, offset_flush_ms)
    running.start()
    try:
        yield running
    finally:
        running.stop()


def create_orders_table(settings: Settings, table: str) -> None:
    """``table`` made anew with ``lakehouse/orders``' columns, format v2, partitioned by day(bid_time),
    as the ingestion makes its table: the sink writes into a table that exists."""
    iceberg_tables.drop(settings, table)
    schema = Schema(
        *(
            NestedField(field_id, column.name, ICEBERG_TYPES[column.type], required=False)
            for field_id, column in enumerate(LAKEHOUSE_ORDERS.columns, start=1)
        )
    )
    bid_time = schema.find_field("bid_time").field_id
    spec = PartitionSpec(PartitionField(bid_time, 1000, DayTransform(), "bid_time_day"))
    iceberg_tables.catalog(settings).create_table(
        (settings.iceberg_namespace, table), schema, partition_spec=spec, properties={"format-version": "2"}
    )


def avro_converter(settings: Settings) -> dict[str, str]:
    """The topic's values through Apicurio's Avro converter: its native API on the stack's registry,
    the Confluent frame's 4-byte id read as the content id the registry's Confluent API hands out."""
    registry = settings.schema_registry_url.removesuffix("/apis/ccompat/v7")
    return {
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "io.apicurio.registry.utils.converter.AvroConverter",
        "value.converter.apicurio.registry.url": f"{registry}/apis/registry/v2",
        "value.converter.apicurio.registry.as-confluent": "true",
        "value.converter.apicurio.registry.use-id": "contentId",
    }


def iceberg_sink(settings: Settings, table: str, control_topic: str, commit_interval_ms: int) -> dict[str, str]:
    """Iceberg's sink over the settings' orders topic into ``table``, one task per partition, committing
    every ``commit_interval_ms`` through ``control_topic``."""
    return {
        "connector.class": "org.apache.iceberg.connect.IcebergSinkConnector",
        "tasks.max": str(settings.orders_partitions),
        "topics": settings.orders_topic,
        **avro_converter(settings),
        "iceberg.tables": f"{settings.iceberg_namespace}.{table}",
        "iceberg.catalog.type": "rest",
        "iceberg.catalog.uri": settings.iceberg_catalog_url,
        "iceberg.catalog.warehouse": settings.warehouse_url,
        "iceberg.catalog.io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        "iceberg.catalog.s3.endpoint": settings.s3_url,
        "iceberg.catalog.s3.path-style-access": "true",
        "iceberg.catalog.s3.access-key-id": settings.s3_access_key,
        "iceberg.catalog.s3.secret-access-key": settings.s3_secret_key,
        "iceberg.catalog.client.region": settings.s3_region,
        "iceberg.kafka.bootstrap.servers": settings.kafka_servers,
        "iceberg.control.topic": control_topic,
        "iceberg.control.commit.interval-ms": str(commit_interval_ms),
    }


class IcebergSinkRounds:
    """Rounds of Iceberg's sink over the settings' orders topic into a fresh table, each on a fresh
    worker until its commits hold the whole topic. Catch-up (``continuous`` false): orders over the
    time from the connector's start to the commit holding the last of them. Continuous: the warm rate
    of its commits. The first round's table must hold the rows of ``reference_table`` (the project's)."""

    sink = "Iceberg's sink"

    def __init__(self, settings: Settings, count: int, reference_table: str, commit_interval_ms: int, continuous: bool):
        self.settings, self.count, self.reference_table = settings, count, reference_table
        self.commit_interval_ms, self.continuous = commit_interval_ms, continuous
        kind = "continuous" if continuous else "catch-up"
        self.folder = settings.state_dir / "bench-throughput" / f"connect-peer-iceberg-{kind}"
        self.profiles: list[dict] = []

    def __call__(self, round_number: int) -> float | None:
        settings = self.settings
        create_orders_table(settings, ICEBERG_TABLE)
        control_topic = f"{CONNECT_TOPIC_PREFIX}{time.time_ns()}-control"
        KafkaResource(environment=SettingsResource.of(settings)).ensure_topics(control_topic)
        name = f"bench-iceberg-sink-{time.time_ns()}"
        config = iceberg_sink(settings, ICEBERG_TABLE, control_topic, self.commit_interval_ms)
        log = self.folder / f"round-{round_number}.log"
        try:
            with worker(settings, self.folder, log) as running:
                started = running.create(name, config)
                commits = iceberg_tables.await_rows(settings, ICEBERG_TABLE, self.count, running.healthy(name))
        finally:
            delete_topics(settings, control_topic)
        check_table(settings, ICEBERG_TABLE, self.count, self.reference_table if round_number == 0 else None)
        caught_up_s = commits[-1][0] / 1000 - started
        self.profiles.append(
            {"commit_interval_ms": self.commit_interval_ms, "caught_up_s": round(caught_up_s, 3), "commits": commits}
        )
        return iceberg_tables.warm_rate(commits) if self.continuous else self.count / caught_up_s


@contextmanager
def virtual_host_s3(settings: Settings, folder: Path, timeout_s: float = 60) -> Iterator[str]:
    """A second s3proxy over the stack's blobs, serving buckets as <bucket>.localhost; yields its URL."""
    port = virtual_host_s3_port(settings)
    if port_open(settings.host, port):
        raise RuntimeError(f"port {port} (the S3 sink's s3proxy) is taken")
    folder.mkdir(parents=True, exist_ok=True)
    properties = s3proxy_properties(
        settings,
        folder / "s3proxy.properties",
        f"s3proxy.endpoint=http://{settings.host}:{port}\ns3proxy.virtual-host={S3_VIRTUAL_HOST}",
    )
    with (folder / "s3proxy.log").open("w") as log:
        process = subprocess.Popen(s3proxy_command(settings, properties), stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout_s
        while not port_open(settings.host, port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the S3 sink's s3proxy did not answer on port {port}; log: {log.name}")
            time.sleep(0.2)
        yield f"http://{S3_VIRTUAL_HOST}:{port}"
    finally:
        process.terminate()
        process.wait(timeout=60)


def s3_sink(settings: Settings, endpoint: str, prefix: str, records_per_object: int) -> dict[str, str]:
    """Camel's S3 sink over the settings' orders topic into the archive's bucket under ``prefix`` through
    the s3proxy at ``endpoint``, the records' value bytes appended into objects of ``records_per_object``
    records; the last one completes when the task stops."""
    options = {
        "streamingUploadMode": "true",
        "batchMessageNumber": records_per_object,
        # Its timer completes the open object from a thread of its own, unsynchronised with the task's
        # (at Camel 3.14 a race that fails the next completion): it must not fire within a round.
        "streamingUploadTimeout": STREAMING_TIMER_OFF_MS,
        "namingStrategy": "random",  # a UUID in each object's name (the first one's aside)
        "keyName": f"{prefix}/orders.bin",
        "overrideEndpoint": "true",
        "uriEndpointOverride": endpoint,
        "region": settings.s3_region,
        "accessKey": f"RAW({settings.s3_access_key})",
        "secretKey": f"RAW({settings.s3_secret_key})",
        "autoCreateBucket": "false",
    }
    return {
        "connector.class": "org.apache.camel.kafkaconnector.CamelSinkConnector",
        # One task: Camel's streaming upload gives each task's first object the key name itself, so
        # a second task's first object would replace the first task's.
        "tasks.max": "1",
        "topics": settings.orders_topic,
        "key.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
        "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
        "camel.sink.url": f"aws2-s3://{settings.archive_bucket}?" + "&".join(f"{k}={v}" for k, v in options.items()),
    }


def committed_records(admin: AdminClient, group: str) -> int:
    """Records the consumer group has committed, over all its partitions (0 before its first commit)."""
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=10)
    return sum(max(partition.offset, 0) for partition in listed.topic_partitions or [])


def await_condition(
    condition: Callable[[], bool], healthy: Callable[[], bool], what: str, timeout_s: float = 900
) -> None:
    """Wait until ``condition`` holds, polling every 0.2 s; fails once ``healthy`` does not, or after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if not healthy() or time.monotonic() > deadline:
            raise RuntimeError(
                f"gave up waiting for {what}: " + ("its worker stopped" if not healthy() else f"over {timeout_s} s")
            )
        time.sleep(0.2)


def value_digest(values: Iterable[bytes]) -> tuple[int, int, int]:
    """Records, bytes and an order-free digest (a sum of hashes) of record values."""
    records = size = total = 0
    for value in values:
        records, size = records + 1, size + len(value)
        total = (total + int.from_bytes(hashlib.blake2b(value, digest_size=8).digest())) % 2**64
    return records, size, total


def topic_values(settings: Settings, count: int) -> Iterator[bytes]:
    """The values of the settings' orders topic, its first ``count`` records, read from the start of
    each partition (assigned, no group); fails when the topic holds fewer."""
    consumer = Consumer({"bootstrap.servers": settings.kafka_servers, "group.id": f"{CONNECT_TOPIC_PREFIX}digest"})
    topic = settings.orders_topic
    consumer.assign([TopicPartition(topic, number, OFFSET_BEGINNING) for number in range(settings.orders_partitions)])
    read = 0
    try:
        while read < count:
            if not (messages := consumer.consume(10_000, timeout=5)):
                raise RuntimeError(f"{topic} ended after {read} of {count} records")
            for message in messages:
                if message.error() is None:
                    read += 1
                    yield message.value() or b""
    finally:
        consumer.close()


def framed_records(blob: bytes) -> Iterator[bytes]:
    """The Confluent-framed Avro records (magic byte, 4-byte schema id, body) one after another in
    ``blob``, each as it was framed: the body's end is where its Avro decoding ends."""
    parsed = fastavro.parse_schema(ORDERS_AVRO_SCHEMA)
    stream = io.BytesIO(blob)
    while (start := stream.tell()) < len(blob):
        if stream.read(5)[:1] != b"\x00":
            raise RuntimeError(f"no Confluent frame at byte {start} of an S3 sink object")
        fastavro.schemaless_reader(stream, parsed, None)
        yield blob[start : stream.tell()]


class S3SinkRounds:
    """Rounds of Camel's S3 sink over the settings' orders topic, each on a fresh worker into a fresh
    prefix, in about ``objects`` objects (more where they would exceed ``MAX_RECORDS_PER_OBJECT``):
    orders over the time from the connector's start to the listing that holds all their bytes. Once
    the sink's committed offsets reach the topic's end the connector is deleted: stopping its task
    completes the object still open. The first round's objects must hold the topic's records."""

    sink = "Camel's S3 sink"

    def __init__(self, settings: Settings, count: int, objects: int):
        self.settings, self.count, self.target_objects = settings, count, objects
        self.folder = settings.state_dir / "bench-throughput" / "connect-peer-s3"
        self.profiles: list[dict] = []
        self.expected: tuple[int, int, int] | None = None

    def objects(self, prefix: str) -> dict[str, int]:
        pages = s3_client(self.settings).get_paginator("list_objects_v2")
        return {
            found["Key"]: found["Size"]
            for page in pages.paginate(Bucket=self.settings.archive_bucket, Prefix=f"{prefix}/")
            for found in page.get("Contents", [])
        }

    def __call__(self, round_number: int) -> float | None:
        settings = self.settings
        if self.expected is None:
            self.expected = value_digest(topic_values(settings, self.count))
        prefix = f"{S3_PREFIX}/{time.time_ns()}"
        per_object = min(-(-self.count // self.target_objects), MAX_RECORDS_PER_OBJECT)
        name = f"bench-s3-sink-{time.time_ns()}"
        log = self.folder / f"round-{round_number}.log"
        hosts = (S3_VIRTUAL_HOST, f"{settings.archive_bucket}.{S3_VIRTUAL_HOST}")
        admin = AdminClient({"bootstrap.servers": settings.kafka_servers})
        with (
            virtual_host_s3(settings, self.folder) as endpoint,
            worker(settings, self.folder, log, hosts, offset_flush_ms=S3_OFFSET_FLUSH_MS) as running,
        ):
            started = running.create(name, s3_sink(settings, endpoint, prefix, per_object))
            healthy = running.healthy(name)
            await_condition(
                lambda: committed_records(admin, f"connect-{name}") >= self.count, healthy, f"{name}'s offsets"
            )
            read_s = time.time() - started
            running.request("DELETE", f"/connectors/{name}")
            assert self.expected is not None
            expected_bytes = self.expected[1]
            await_condition(
                lambda: sum(self.objects(prefix).values()) >= expected_bytes, running.running, f"{name}'s objects"
            )
            caught_up_s = time.time() - started
        objects = self.objects(prefix)
        if round_number == 0:
            client = s3_client(settings)
            written = value_digest(
                record
                for key in objects
                for record in framed_records(client.get_object(Bucket=settings.archive_bucket, Key=key)["Body"].read())
            )
            if written != self.expected:
                raise RuntimeError(
                    f"the S3 sink's objects under {prefix} hold (records, bytes, digest) {written}, "
                    f"the topic {self.expected}"
                )
        s3_client(settings).delete_objects(
            Bucket=settings.archive_bucket, Delete={"Objects": [{"Key": key} for key in objects]}
        )
        self.profiles.append(
            {"objects": len(objects), "offsets_at_end_s": round(read_s, 3), "caught_up_s": round(caught_up_s, 3)}
        )
        return self.count / caught_up_s

"""Runs the Flink peers (``bench/flink_ingestion.py``, ``bench/flink_supplier_stats.py``) as
subjects of the throughput benchmark's rounds, and checks that each wrote what the project's job wrote.

The peer runs in its own interpreter (``make flink-peer``: ``.cache/flink-peer``, PyFlink from
pyproject.toml's ``flink-peer`` group) with its connector jars (``.cache/jars/flink-peer``) on the
PyFlink gateway's classpath. It runs on Flink's local mini-cluster with as many task slots as a
Spark job has cores. Its rate is orders read over the Flink job's net runtime: from the job's start
to its end, the last Iceberg commit or Kafka write included. That compares with the project's query time, since neither
counts the JVM start or the catalog set-up before the job.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Mapping
from decimal import Decimal
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from bench import iceberg_tables
from lineage_assets.datasets import LAKEHOUSE_ORDERS
from lineage_assets.resources.kafka import KafkaResource
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.settings import Settings

JOBS = Path(__file__).parent
TABLE = "bench_flink_orders"
WINDOWS_TOPIC_PREFIX = "bench-flink-supplier-stats-"  # + a time: the windows peer's output topic of each round
COMPARED_COLUMNS = tuple(column.name for column in LAKEHOUSE_ORDERS.columns)


def interpreter(settings: Settings) -> Path:
    python = settings.cache_dir / "flink-peer" / "bin" / "python"
    jars = settings.jars_dir / "flink-peer"
    if not python.exists() or not any(jars.glob("*.jar")):
        raise RuntimeError(f"the Flink peer is not installed ({python}, {jars}): run `make flink-peer`")
    return python


def _options(options: Mapping[str, object]) -> list[str]:
    return [part for key, value in options.items() for part in (f"--{key}", str(value))]


def peer_command(
    settings: Settings, script: Path, report: Path, parallelism: int, output: Mapping[str, object]
) -> list[str]:
    """A peer job reading the settings' orders topic through their registry, writing to ``output``."""
    return [
        str(interpreter(settings)),
        str(script),
        *_options(
            {
                "bootstrap-servers": settings.kafka_servers,
                "topic": settings.orders_topic,
                "registry-url": settings.schema_registry_url,
                "parallelism": parallelism,
                "report": report,
                **output,
            }
        ),
    ]


def environment(settings: Settings, log_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        # PyFlink's gateway puts HADOOP_CLASSPATH on its classpath: the connectors, Iceberg and Hadoop's client.
        "HADOOP_CLASSPATH": f"{settings.jars_dir / 'flink-peer'}/*",
        # s3proxy rejects the AWS SDK's default flexible-checksum headers (as for the stack's catalog).
        "AWS_REQUEST_CHECKSUM_CALCULATION": "WHEN_REQUIRED",
        "AWS_RESPONSE_CHECKSUM_VALIDATION": "WHEN_REQUIRED",
        "FLINK_LOG_DIR": str(log_dir),
    }


class PeerRounds:
    """Bounded runs of one peer job over the bench topic, each into a fresh output. What the first
    round wrote must equal what the project's job wrote in the same round (measured before it)
    before any rate counts."""

    script: Path

    def __init__(self, settings: Settings, count: int):
        self.settings, self.count = settings, count
        self.folder = settings.state_dir / "bench-throughput" / f"flink-peer-{self.script.stem}"
        self.profiles: list[dict] = []

    def output(self, round_number: int) -> dict[str, str]:
        """The job's own options for a round: a fresh output, made ready."""
        raise NotImplementedError

    def check(self, round_number: int, output: dict[str, str]) -> None:
        raise NotImplementedError

    def command(self, output: dict[str, str], report: Path) -> list[str]:
        return peer_command(self.settings, self.script, report, self.settings.spark_cores_per_job, output)

    def __call__(self, round_number: int) -> float | None:
        """Orders/s of one round; None when the round measured no rate (a continuous peer's)."""
        settings = self.settings
        self.folder.mkdir(parents=True, exist_ok=True)
        report, log = self.folder / "report.json", self.folder / f"round-{round_number}.log"
        report.unlink(missing_ok=True)
        output = self.output(round_number)
        command = self.command(output, report)
        started = time.monotonic()
        with log.open("w") as written:
            finished = subprocess.run(
                command,
                stdout=written,
                stderr=subprocess.STDOUT,
                env=environment(settings, self.folder / "flink-logs"),
                timeout=1800,
            )
        process_s = round(time.monotonic() - started, 3)
        if finished.returncode != 0 or not report.exists():
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
            raise RuntimeError(
                f"the Flink peer {self.script.name} failed (exit {finished.returncode}); log: {log}\n{tail}"
            )
        self.check(round_number, output)
        self.profiles.append({**json.loads(report.read_text()), "process_s": process_s})
        return self.count / self.profiles[-1]["job_net_runtime_s"]


class IngestionPeer(PeerRounds):
    """The ingestion's peer, into its table dropped before each round; compared with ``reference_table``."""

    script = JOBS / "flink_ingestion.py"

    def __init__(self, settings: Settings, count: int, reference_table: str):
        super().__init__(settings, count)
        self.reference_table = reference_table

    def output(self, round_number: int) -> dict[str, str]:
        settings = self.settings
        iceberg_tables.drop(settings, TABLE)
        return {
            "catalog-url": settings.iceberg_catalog_url,
            "warehouse": settings.warehouse_url,
            "s3-endpoint": settings.s3_url,
            "s3-access-key": settings.s3_access_key,
            "s3-secret-key": settings.s3_secret_key,
            "s3-region": settings.s3_region,
            "namespace": settings.iceberg_namespace,
            "table": TABLE,
        }

    def check(self, round_number: int, output: dict[str, str]) -> None:
        check_table(self.settings, TABLE, self.count, self.reference_table if round_number == 0 else None)


def check_table(settings: Settings, table: str, count: int, reference_table: str | None) -> None:
    """A peer's ``table`` holds ``count`` rows and, given a ``reference_table`` (the project's), the same
    rows of the compared columns."""
    if (written := iceberg_tables.row_count(settings, table)) != count:
        raise RuntimeError(f"the peer wrote {written} rows into {table}, expected {count}")
    if (
        reference_table
        and (differing := iceberg_tables.first_difference(settings, table, reference_table, COMPARED_COLUMNS))
        is not None
    ):
        raise RuntimeError(
            f"the peer's rows in {table} differ from {reference_table}'s; first difference, "
            f"peer then project: {differing}"
        )


class ContinuousIngestionPeer(IngestionPeer):
    """The ingestion's peer unbounded, as the lab ran it: each checkpoint (every ``checkpoint_ms``)
    commits to Iceberg. Stopped once its commits hold the whole topic; its rate is their warm rate
    (``iceberg_tables.warm_rate``), the measure of the project's continuous deployment too."""

    def __init__(self, settings: Settings, count: int, reference_table: str, checkpoint_ms: int):
        super().__init__(settings, count, reference_table)
        self.checkpoint_ms = checkpoint_ms

    def __call__(self, round_number: int) -> float | None:
        self.folder.mkdir(parents=True, exist_ok=True)
        log = self.folder / f"continuous-round-{round_number}.log"
        output = self.output(round_number)
        command = [*self.command(output, self.folder / "report.json"), "--checkpoint-ms", str(self.checkpoint_ms)]
        with (
            log.open("w") as written,
            subprocess.Popen(
                command,
                stdout=written,
                stderr=subprocess.STDOUT,
                env=environment(self.settings, self.folder / "flink-logs"),
            ) as process,
        ):
            try:
                commits = iceberg_tables.await_rows(self.settings, TABLE, self.count, lambda: process.poll() is None)
            except RuntimeError as error:
                raise RuntimeError(f"the continuous Flink peer: {error}; log: {log}") from None
            finally:
                process.terminate()
        self.check(round_number, output)
        self.profiles.append({"checkpoint_ms": self.checkpoint_ms, "commits": commits})
        return iceberg_tables.warm_rate(commits)


class WindowsPeer(PeerRounds):
    """The live windows' peer, into a new topic each round; compared with the project's round-0 topic,
    which ``reference_topic`` names once that round has run."""

    script = JOBS / "flink_supplier_stats.py"

    def __init__(self, settings: Settings, count: int, reference_topic: Callable[[], str]):
        super().__init__(settings, count)
        self.reference_topic = reference_topic

    def output(self, round_number: int) -> dict[str, str]:
        topic = f"{WINDOWS_TOPIC_PREFIX}{time.time_ns()}"
        KafkaResource(environment=SettingsResource.of(self.settings)).ensure_topics(topic)
        return {"output-topic": topic}

    def check(self, round_number: int, output: dict[str, str]) -> None:
        if round_number:
            return
        peer, project = windows(self.settings, output["output-topic"]), windows(self.settings, self.reference_topic())
        # At the topic's end Flink closes every window; the project's run leaves open those the
        # watermark has not passed. Every window the project closed must be the peer's, equal.
        differing = {
            window: (peer.get(window), stats) for window, stats in project.items() if peer.get(window) != stats
        }
        still_open = [window for window in peer.keys() - project.keys() if window[1] <= max(w[1] for w in project)]
        if not project or differing or still_open:
            raise RuntimeError(
                f"the Flink peer's windows differ from the project's ({len(peer)} against {len(project)}): "
                f"{len(differing)} differ, e.g. {next(iter(differing.items()), None)}; "
                f"{len(still_open)} the project closed none of, e.g. {still_open[:1]}"
            )


class LiveWindowsPeer:
    """The live windows' peer unbounded, as the lab deployed it: from the start of the settings' orders
    topic on, each window into ``output_topic`` (a new topic) as the watermark closes it, with a
    checkpoint every ``checkpoint_ms``, between ``start`` and ``stop``. One source reader per
    partition of the topic: Flink's watermark is the least of its readers', so a reader without a
    partition would hold it back."""

    script = JOBS / "flink_supplier_stats.py"

    def __init__(self, settings: Settings, folder: Path, checkpoint_ms: int, parallelism: int):
        self.settings, self.folder, self.checkpoint_ms, self.parallelism = settings, folder, checkpoint_ms, parallelism
        self.output_topic = f"{WINDOWS_TOPIC_PREFIX}{time.time_ns()}"
        self.log = folder / "live-windows-peer.log"
        self.process: subprocess.Popen | None = None

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def failure(self) -> str:
        """Why it stopped: its exit code and the end of its log."""
        tail = "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])
        code = self.process.returncode if self.process else None
        return f"the Flink live windows peer exited {code}; log: {self.log}\n{tail}"

    def start(self) -> None:
        KafkaResource(environment=SettingsResource.of(self.settings)).ensure_topics(self.output_topic)
        self.folder.mkdir(parents=True, exist_ok=True)
        command = peer_command(
            self.settings,
            self.script,
            self.folder / "live-windows-peer-report.json",
            self.parallelism,
            {"output-topic": self.output_topic, "checkpoint-ms": self.checkpoint_ms},
        )
        with self.log.open("w") as written:
            self.process = subprocess.Popen(
                command,
                stdout=written,
                stderr=subprocess.STDOUT,
                env=environment(self.settings, self.folder / "flink-logs"),
            )

    def stop(self) -> None:
        """Stop the job (if it runs) and delete its topic (if it was started)."""
        if self.process is None:
            return
        if self.running():
            self.process.terminate()
            self.process.wait(timeout=60)
        admin = AdminClient({"bootstrap.servers": self.settings.kafka_servers})
        for future in admin.delete_topics([self.output_topic]).values():
            future.result(timeout=30)


def windows(settings: Settings, topic: str) -> dict[tuple[str, str, str], tuple[Decimal, int]]:
    """(window start, end, supplier) -> (total price, count), from the records of a window topic."""
    found = {}
    for value in topic_values(settings, topic):
        record = json.loads(value, parse_float=Decimal)
        found[(record["window_start"], record["window_end"], record["supplier"])] = (
            Decimal(record["total_price"]),
            int(record["count"]),
        )
    return found


def topic_values(settings: Settings, topic: str) -> list[bytes]:
    """Every record value of the topic as it ends now."""
    consumer = Consumer(
        {"bootstrap.servers": settings.kafka_servers, "group.id": "bench-flink-peer-check", "enable.auto.commit": False}
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions if ends[p]])
        values: list[bytes] = []
        remaining = sum(ends.values())
        while remaining:
            for message in consumer.consume(10_000, timeout=10):
                if message.error() is None:
                    if (value := message.value()) is None:
                        raise RuntimeError(
                            f"{topic} partition {message.partition()} offset {message.offset()}: no value"
                        )
                    values.append(value)
                    remaining -= 1
        return values
    finally:
        consumer.close()

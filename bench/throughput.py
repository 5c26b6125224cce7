"""Streaming throughput: orders/s the ingestion job (Kafka -> Iceberg), the archive job (Kafka -> S3
JSON) and the live windows job (Kafka -> Kafka) process, against the raw read rate of Kafka's own
consumer on the same topic (the ceiling), of a plain Python consumer (a second baseline), and
against Flink peers of the ingestion and the windows (the seed lab's jobs in PyFlink,
``bench/flink_peer.py``) and Kafka Connect peers of the ingestion (Apache Iceberg's sink connector,
``bench/connect_peer.py``), alternately.

"Sustained" is measured as the catch-up run (Trigger.AvailableNow) of a job over a topic pre-filled
with N orders, each round from a fresh checkpoint. A job's rate is rows / query time: from the
query's start to the end of its last micro-batch, as the job's StreamingQueryListener progress log
records them, so Spark's session start-up and the table set-up before the query are left out (the
spark-submit wall time, the job's own duration and each batch's are reported beside it), and each
round's Spark SQL executions with their seconds and tasks say where the query's time went. The
baselines read and count the raw records, no decoding. The jobs run on their own topic, Iceberg
table and archive prefix, emptied at the start.
The ingestion's peer does less than the ingestion: no dead letters, no check for a batch already committed.
"Continuous" is the ingestion as a deployment runs it, against the peer unbounded, each over the
same topic: the rate of their Iceberg commits after the first, once the JVMs have warmed up. Twice:
committing about every second (on the topic above), and at the deployments' own cadence (a commit
every ``TRIGGER_SECONDS`` of the ingestion or more often, on a topic ``DEPLOYED_TOPIC_FACTOR`` times as large, so
that such commits come several times).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import boto3
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from bench import iceberg_tables
from bench.connect_peer import CATCH_UP_COMMIT_MS, IcebergSinkRounds, S3SinkRounds
from bench.flink_peer import WINDOWS_TOPIC_PREFIX, ContinuousIngestionPeer, IngestionPeer, PeerRounds, WindowsPeer
from bench.measure import alternate, interval_text, median, paired_ratio, rounded
from bench.spark_profile import Instrumented
from lineage_assets.datasets import (
    ARCHIVE,
    LAKEHOUSE_ORDERS,
    SUPPLIER_STATS_LIVE,
    iceberg_table_name,
    orders_avro_schema_json,
)
from lineage_assets.generator import GeneratorConfig, generate_orders, produce_orders
from lineage_assets.job_specs import archive_job, ingestion_job, live_stats_job
from lineage_assets.resources.kafka import KafkaResource
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.resources.spark_jobs import SparkJobsResource
from lineage_assets.settings import Settings
from lineage_assets.stack.services.base import CONF_DIR, java
from lineage_assets.stack.services.kafka import KAFKA
from lineage_assets.streaming.deployments import TRIGGER_SECONDS

TOPIC_PREFIX = "bench-throughput-"  # one topic per size and partition count: a job reads its topic whole
TABLE = "bench_throughput_orders"
CONTINUOUS_TABLE = "bench_throughput_continuous_orders"
DEPLOYED_TABLE = "bench_throughput_deployed_orders"
DEPLOYED_TOPIC_FACTOR = 4
ARCHIVE_PREFIX = "bench-throughput"
ORDER_INTERVAL_S = 0.01  # of bid time between one order of the topic and the next
WINDOWS_TOPIC_PREFIX_PROJECT = "bench-"  # + the round's name: the live windows job's output topic of each round
TARGET_TO_CEILING = {"ingestion": 0.5}  # to Kafka's own consumer
FETCH_MAX_BYTES = 52_428_800  # both baseline consumers
TARGET_TO_PEER = 1.0  # each of these against its Flink peer
PEER_TARGETS = ("ingestion", "live_windows", "ingestion_continuous_deployed")


def with_option(arguments: list[str], option: str, value: str) -> list[str]:
    """The arguments with ``option``'s value replaced (appended when absent)."""
    if option not in arguments:
        return [*arguments, option, value]
    at = arguments.index(option) + 1
    return [*arguments[:at], value, *arguments[at + 1 :]]


def fill_topic(kafka: KafkaResource, count: int) -> int:
    """Top the size's topic up to ``count`` generated orders (kept between runs); returns how many were produced."""
    settings = kafka.environment.settings
    topic = settings.orders_topic
    kafka.ensure_topics(topic)
    kafka.register_value_schema(topic, orders_avro_schema_json())
    present = sum(kafka.end_offsets(topic).values())
    start = dt.datetime(2026, 2, 1, tzinfo=dt.UTC)
    config = GeneratorConfig(count=count, seed=11, start=start, interval_seconds=ORDER_INTERVAL_S)
    orders = list(generate_orders(config))[present:]
    if orders:
        produce_orders(orders, settings, topic)
    return len(orders)


def empty_sinks(settings: Settings) -> None:
    """Drop the bench table and the archive prefix, so each run starts empty."""
    iceberg_tables.drop(settings, TABLE)
    s3 = boto3.resource(
        "s3",
        endpoint_url=settings.s3_url,
        aws_access_key_id=settings.s3_access_key,
        aws_secret_access_key=settings.s3_secret_key,
        region_name=settings.s3_region,
    )
    s3.Bucket(settings.archive_bucket).objects.filter(Prefix=f"{ARCHIVE_PREFIX}/").delete()


def delete_window_topics(settings: Settings) -> None:
    """Delete the live windows' output topics of every round (compared once, then of no use), those
    of earlier runs that stopped before this step included."""
    project = WINDOWS_TOPIC_PREFIX_PROJECT + Path(SUPPLIER_STATS_LIVE.job.source).stem + "-"
    admin = AdminClient({"bootstrap.servers": settings.kafka_servers})
    rounds = [
        topic for topic in admin.list_topics(timeout=10).topics if topic.startswith((project, WINDOWS_TOPIC_PREFIX))
    ]
    for future in admin.delete_topics(rounds).values() if rounds else ():
        future.result(timeout=30)


def ceiling(settings: Settings, count: int) -> float:
    """Records/s of Kafka's own consumer reading the whole topic from its first offset, raw: the
    stack's Kafka's consumer perf test (``kafka-consumer-perf-test``'s class) with the fetch settings
    of ``python_consumer``. Its fetch rate: from its first fetch to its last, without joining the group."""
    with tempfile.NamedTemporaryFile("w", suffix=".properties") as config:
        config.write(f"fetch.max.bytes={FETCH_MAX_BYTES}\nauto.offset.reset=earliest\n")
        config.flush()
        done = subprocess.run(
            [
                java(),
                "-cp",
                KAFKA.jar_classpath(settings),
                f"-Dlog4j2.configurationFile={CONF_DIR / 'jvm-log4j2.properties'}",
                "org.apache.kafka.tools.ConsumerPerformance",
                *("--bootstrap-server", settings.kafka_servers, "--topic", settings.orders_topic),
                *("--messages", str(count), "--group", f"bench-throughput-ceiling-{time.time_ns()}"),
                *("--consumer.config", config.name, "--timeout", "60000"),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
    header, values = [line.split(", ") for line in done.stdout.strip().splitlines()[-2:]]
    return float(dict(zip(header, values))["fetch.nMsg.sec"])


def python_consumer(settings: Settings, count: int) -> float:
    """Records/s of a plain Python consumer (confluent-kafka) reading the whole topic from its first
    offset, raw: what a Python process can read, a second baseline below Kafka's own."""
    topic = settings.orders_topic
    consumer = Consumer(
        {
            "bootstrap.servers": settings.kafka_servers,
            "group.id": "bench-throughput-ceiling",
            "enable.auto.commit": False,
            "fetch.max.bytes": FETCH_MAX_BYTES,
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        started, seen = time.monotonic(), 0
        while seen < count:
            seen += sum(1 for message in consumer.consume(10_000, timeout=5) if message.error() is None)
        return count / (time.monotonic() - started)
    finally:
        consumer.close()


def query_profile(progress_file: Path) -> dict:
    """The query's time from its start to the end of its last micro-batch, the time before its first
    batch began, and its batches, as the job's progress log has them (seconds)."""
    records = [json.loads(line) for line in progress_file.read_text().splitlines()]
    started = next(dt.datetime.fromisoformat(r["time"]) for r in records if r["event"] == "started")
    batches = [
        (dt.datetime.fromisoformat(r["time"]), r["batch_duration_ms"] / 1000)
        for r in records
        if r["event"] == "progress"
    ]
    ended = max(at + dt.timedelta(seconds=duration) for at, duration in batches)
    return {
        "query_s": round((ended - started).total_seconds(), 3),
        "batches": len(batches),
        "before_first_batch_s": round((min(at for at, _ in batches) - started).total_seconds(), 3),
        "batch_s": [round(duration, 3) for _, duration in batches],
        "batch_phases_ms": [r.get("phases_ms") for r in records if r["event"] == "progress"],
    }


class JobRounds:
    """Catch-up runs of one streaming job over the bench topic, each from a fresh checkpoint and,
    given ``fresh`` (an option and a template of its value with ``{name}``), into a fresh output,
    made ready by ``prepare``: Spark's file sink skips batch ids its output folder's
    ``_spark_metadata`` log already holds, and a window topic is compared whole."""

    def __init__(
        self,
        spark_jobs: SparkJobsResource,
        script: str,
        arguments: list[str],
        count: int,
        fresh: tuple[str, str] | None = None,
        prepare: Callable[[str], object] = lambda output: None,
    ):
        self.spark_jobs, self.script, self.arguments, self.count = spark_jobs, script, arguments, count
        self.fresh, self.prepare = fresh, prepare
        self.outputs: list[str] = []  # each round's fresh output
        self.profiles: list[dict] = []
        self.instrumented = Instrumented(
            spark_jobs.environment.settings.state_dir / "bench-throughput" / f"{Path(script).stem}-profile"
        )

    def __call__(self, round_number: int) -> float:
        name = f"{Path(self.script).stem}-{time.time_ns()}"
        folder = self.spark_jobs.environment.settings.state_dir / "bench-throughput" / name
        progress = folder / "progress.jsonl"
        arguments = with_option(self.arguments, "--checkpoint", str(folder / "checkpoint"))
        if self.fresh:
            option, template = self.fresh
            self.outputs.append(template.format(name=name))
            self.prepare(self.outputs[-1])
            arguments = with_option(arguments, option, self.outputs[-1])
        self.instrumented.reset()
        started = time.monotonic()
        with self.instrumented.active():
            report = self.spark_jobs.submit(self.script, [*arguments, "--progress-file", str(progress)])
        submit_s = round(time.monotonic() - started, 3)
        if report["rows_in"] != self.count:
            raise RuntimeError(f"{self.script} read {report['rows_in']} records, expected {self.count}")
        self.profiles.append(
            {
                **query_profile(progress),
                "spark_submit_s": submit_s,
                "job_report_s": report["duration_seconds"],
                "sql_executions": self.instrumented.sql_profile(),
            }
        )
        shutil.rmtree(folder)
        return self.count / self.profiles[-1]["query_s"]


class ContinuousRounds:
    """The ingestion as a continuous deployment runs it: with a progress file (each commit reports
    the table after it, for the deployment's lineage), micro-batches back to back (a trigger of 0 s),
    each of at most 1.1/``batches`` of the topic (Spark rounds each partition's share down: an exact
    share would leave a last batch of a few records), into ``table`` emptied before each round; drained once its
    commits hold the whole topic. Its rate is their warm rate (``iceberg_tables.warm_rate``): the
    rows/s a deployment sustains once its JVM has warmed up, which a catch-up run of one batch never reaches."""

    def __init__(self, spark_jobs: SparkJobsResource, arguments: list[str], count: int, table: str, batches: int):
        self.spark_jobs, self.count, self.table = spark_jobs, count, table
        settings = spark_jobs.environment.settings
        self.arguments = with_option(
            with_option(
                with_option(
                    with_option(arguments, "--table", iceberg_table_name(settings, table)), "--mode", "continuous"
                ),
                "--trigger-seconds",
                "0",
            ),
            "--max-records-per-batch",
            str(max(1, count * 11 // (10 * batches))),
        )
        self.profiles: list[dict] = []

    def __call__(self, round_number: int) -> float | None:
        settings = self.spark_jobs.environment.settings
        folder = settings.state_dir / "bench-throughput" / f"continuous-{time.time_ns()}"
        folder.mkdir(parents=True)
        drain = folder / "drain"
        iceberg_tables.drop(settings, self.table)
        arguments = self.arguments
        for option, value in (
            ("--checkpoint", folder / "checkpoint"),
            ("--drain-file", drain),
            ("--progress-file", folder / "progress.jsonl"),
        ):
            arguments = with_option(arguments, option, str(value))
        with ThreadPoolExecutor(1) as pool:
            run = pool.submit(self.spark_jobs.submit, LAKEHOUSE_ORDERS.job.source, arguments)
            try:
                commits = iceberg_tables.await_rows(settings, self.table, self.count, lambda: not run.done())
            finally:
                drain.touch()
            report = run.result()
        if report["rows_written"] != self.count:
            raise RuntimeError(
                f"the continuous ingestion wrote {report['rows_written']} records, expected {self.count}"
            )
        self.profiles.append({"batches": report["batches"], "commits": commits})
        shutil.rmtree(folder)
        return iceberg_tables.warm_rate(commits)


# A full run's topic takes each job tens of seconds, so that the JVMs' warm-up (a 300,000-order
# run spends most of its 8 s there, at a third of the rate 2,000,000 orders reach) is a small part of it.
FULL_ORDERS, QUICK_ORDERS = 2_000_000, 20_000


def topic_environment(environment: SettingsResource, count: int, partitions: int) -> SettingsResource:
    """``environment`` with its orders topic the bench's topic of ``count`` orders in ``partitions``."""
    return SettingsResource(
        overrides={
            **environment.overrides,
            "LINEAGE_ASSETS_ORDERS_TOPIC": f"{TOPIC_PREFIX}{count}-p{partitions}",
            "LINEAGE_ASSETS_ORDERS_PARTITIONS": str(partitions),
        }
    )


def _ratio(ours: float | None, theirs: float | None) -> float | None:
    """``ours / theirs`` to 4 digits; None when either measured nothing."""
    return round(ours / theirs, 4) if ours and theirs else None


def run(environment: SettingsResource, quick: bool, count: int | None = None, rounds: int | None = None) -> dict:
    count = count or (QUICK_ORDERS if quick else FULL_ORDERS)
    # Eight rounds by default: rounds of one subject spread by about ±5% on a 2-core machine, and the
    # live windows and the deployed ingestion are within 10% of their peers, so the paired intervals
    # need eight rounds to say on which side of 1.0 a ratio lies.
    rounds = rounds or (1 if quick else 8)
    # Partitioned as the orders topic of a deployment that scales is: one partition for each core a
    # job has, so that both engines can read with all of them.
    partitions = environment.settings.spark_cores_per_job
    deployed_count = count * DEPLOYED_TOPIC_FACTOR
    bench_topic, deployed_topic = (
        topic_environment(environment, orders, partitions) for orders in (count, deployed_count)
    )
    settings, deployed_settings = bench_topic.settings, deployed_topic.settings
    kafka, spark_jobs = KafkaResource(environment=bench_topic), SparkJobsResource(environment=bench_topic)
    produced = fill_topic(kafka, count) + fill_topic(KafkaResource(environment=deployed_topic), deployed_count)
    empty_sinks(settings)
    jobs = {
        "ingestion": JobRounds(
            spark_jobs,
            LAKEHOUSE_ORDERS.job.source,
            with_option(list(ingestion_job(settings).arguments), "--table", iceberg_table_name(settings, TABLE)),
            count,
        ),
        "archive": JobRounds(
            spark_jobs,
            ARCHIVE.job.source,
            list(archive_job(settings).arguments),
            count,
            fresh=("--path", f"s3://{settings.archive_bucket}/{ARCHIVE_PREFIX}/{{name}}"),
        ),
        "live_windows": JobRounds(
            spark_jobs,
            SUPPLIER_STATS_LIVE.job.source,
            list(live_stats_job(settings).arguments),
            count,
            fresh=("--output-topic", WINDOWS_TOPIC_PREFIX_PROJECT + "{name}"),
            prepare=kafka.ensure_topics,
        ),
    }
    # Micro-batches of an eighth of the topic commit about every 1.5 s; of a sixth of the larger
    # topic, every 4 s once warm: as often as the peer's checkpoints, or more often.
    continuous = {
        "ingestion_continuous": ContinuousRounds(
            spark_jobs, list(ingestion_job(settings).arguments), count, CONTINUOUS_TABLE, batches=8
        ),
        "ingestion_continuous_deployed": ContinuousRounds(
            SparkJobsResource(environment=deployed_topic),
            list(ingestion_job(deployed_settings).arguments),
            deployed_count,
            DEPLOYED_TABLE,
            batches=6,
        ),
    }
    # The peer's checkpoint intervals, for the full topic's size (scaled down with a quick run's).
    scaled_ms = lambda full_ms: max(100, full_ms * count // FULL_ORDERS)  # noqa: E731
    peers: dict[str, PeerRounds] = {
        "ingestion": IngestionPeer(settings, count, reference_table=TABLE),
        "live_windows": WindowsPeer(settings, count, reference_topic=lambda: jobs["live_windows"].outputs[0]),
        "ingestion_continuous": ContinuousIngestionPeer(
            settings, count, reference_table=TABLE, checkpoint_ms=scaled_ms(1000)
        ),
        "ingestion_continuous_deployed": ContinuousIngestionPeer(
            deployed_settings,
            deployed_count,
            reference_table=DEPLOYED_TABLE,
            checkpoint_ms=scaled_ms(int(TRIGGER_SECONDS[LAKEHOUSE_ORDERS.key] * 1000)),
        ),
    }
    # The Iceberg sink commits every second in catch-up, and at the peer checkpoints' cadence in continuous.
    iceberg_peers = {
        "ingestion": IcebergSinkRounds(settings, count, TABLE, CATCH_UP_COMMIT_MS, continuous=False),
        "ingestion_continuous_deployed": IcebergSinkRounds(
            deployed_settings,
            deployed_count,
            DEPLOYED_TABLE,
            scaled_ms(int(TRIGGER_SECONDS[LAKEHOUSE_ORDERS.key] * 1000)),
            continuous=True,
        ),
    }
    # The S3 sink writes as many objects as the archive job writes files: one per partition and hour of bid time.
    archive_files = partitions * math.ceil(count * ORDER_INTERVAL_S / 3600)
    connect_peers: dict[str, IcebergSinkRounds | S3SinkRounds] = {
        **iceberg_peers,
        "archive": S3SinkRounds(settings, count, archive_files),
    }
    subjects: dict[str, Callable[[int], float | None]] = {
        "ceiling": lambda _: ceiling(settings, count),
        "python_consumer": lambda _: python_consumer(settings, count),
        **jobs,
        **continuous,
        **{f"flink_{name}": peer for name, peer in peers.items()},
        **{f"connect_{name}": peer for name, peer in connect_peers.items()},
    }
    rates = alternate(rounds, subjects)
    delete_window_topics(settings)
    # A continuous run too short for two commits has no warm rate (a quick run's peer may commit once).
    medians = {
        name: median(measured, 1) if (measured := [v for v in values if v is not None]) else None
        for name, values in rates.items()
    }
    # Apart from the subjects the chart draws beside their Flink peers.
    connect_medians = {name: medians.pop(f"connect_{name}") for name in connect_peers}
    ratios = {
        name: ratio
        for name in medians
        if name != "ceiling" and (ratio := _ratio(medians[name], medians["ceiling"])) is not None
    }
    to_python_consumer = {
        name: ratio for name in jobs if (ratio := _ratio(medians[name], medians["python_consumer"])) is not None
    }
    to_peer = {name: ratio for name in peers if (ratio := _ratio(medians[name], medians[f"flink_{name}"])) is not None}
    to_connect_peer = {
        name: ratio for name in connect_peers if (ratio := _ratio(medians[name], connect_medians[name])) is not None
    }
    # Each peer ratio from its rounds in pairs too: with the interval that says whether a ratio's side of 1.0 holds.
    paired_to_peer = {name: paired_ratio(rates[name], rates[f"flink_{name}"]) for name in to_peer}
    paired_to_connect_peer = {name: paired_ratio(rates[name], rates[f"connect_{name}"]) for name in to_connect_peer}
    # The verdict's clock (query time against Flink's net runtime) read another way, from the same rounds.
    catch_up_by = {
        "launch_to_exit": round(
            median([run["process_s"] for run in peers["ingestion"].profiles])
            / median([run["spark_submit_s"] for run in jobs["ingestion"].profiles]),
            4,
        ),
    }
    return {
        "name": "streaming_throughput",
        "target": f"{', '.join(name.replace('_', ' ') for name in PEER_TARGETS)} >= {TARGET_TO_PEER}x their Flink "
        "peers; to the ceiling: " + ", ".join(f"{name} >= {ratio}" for name, ratio in TARGET_TO_CEILING.items()),
        "met": all(to_peer[name] >= TARGET_TO_PEER for name in PEER_TARGETS)
        and all(ratios[name] >= ratio for name, ratio in TARGET_TO_CEILING.items()),
        "orders": count,
        "partitions": partitions,
        "rounds": rounds,
        "produced_now": produced,
        "median_rows_per_s": medians,
        "ratios": ratios,
        "to_python_consumer": to_python_consumer,
        "to_flink_peer": to_peer,
        "to_flink_peer_paired": paired_to_peer,
        "connect_peer_rows_per_s": connect_medians,
        "connect_peer_sinks": {name: peer.sink for name, peer in connect_peers.items()},
        "to_connect_peer": to_connect_peer,
        "to_connect_peer_paired": paired_to_connect_peer,
        "ingestion_to_flink_peer_by": catch_up_by,
        "rates_rows_per_s": rounded(rates, 1),
        "runs": {
            **{name: job.profiles for name, job in jobs.items()},
            **{name: job.profiles for name, job in continuous.items()},
            **{f"flink_{name}": peer.profiles for name, peer in peers.items()},
            **{f"connect_{name}": peer.profiles for name, peer in connect_peers.items()},
        },
    }


def peer_summary(result: dict) -> str:
    rates, to_peer = result["median_rows_per_s"], result["to_flink_peer"]
    by = ", ".join(
        f"{way.replace('_', ' ')} {ratio}" for way, ratio in result.get("ingestion_to_flink_peer_by", {}).items()
    )
    paired, connect_paired = result.get("to_flink_peer_paired", {}), result.get("to_connect_peer_paired", {})
    flink = "; ".join(
        f"{name.replace('_', ' ')} {rates[f'flink_{name}']:,}/s (project / peer {ratio} of the medians"
        + (f", paired rounds {interval_text(paired[name])}" if name in paired else "")
        + (f"; {by}" if name == "ingestion" and by else "")
        + ")"
        for name, ratio in to_peer.items()
    )
    connect_rates = result.get("connect_peer_rows_per_s", {})
    sinks = result.get("connect_peer_sinks", {})
    connect = "; ".join(
        f"{name.replace('_', ' ')} ({sinks.get(name, IcebergSinkRounds.sink)}) {connect_rates[name]:,}/s "
        f"(project / peer {ratio} of the medians"
        + (f", paired rounds {interval_text(connect_paired[name])}" if name in connect_paired else "")
        + ")"
        for name, ratio in result.get("to_connect_peer", {}).items()
    )
    return flink + (f". Kafka Connect peers: {connect}" if connect else "")


def summary(result: dict) -> str:
    rates, ratios = result["median_rows_per_s"], result["ratios"]
    jobs = ", ".join(
        f"{name.replace('_', ' ')} {rates[name]:,}/s ({ratios[name]})"
        for name in ratios
        if not name.startswith("flink_") and name != "python_consumer"
    )
    return (
        f"{result['orders']:,} orders in {result['partitions']} partitions, catch-up, query (job) time; orders/s "
        f"(ratio to the ceiling): ceiling (Kafka's consumer) {rates['ceiling']:,}/s, Python consumer "
        f"{rates['python_consumer']:,}/s ({ratios.get('python_consumer')}), {jobs}"
    )

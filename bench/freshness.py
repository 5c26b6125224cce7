"""Freshness: seconds from an order's produce to its visibility in `lakehouse/orders` and to its
window's appearance on the `supplier-stats` topic, with the ingestion and live-stats jobs deployed
in continuous mode (the deployments' default trigger interval).

Orders are produced at a steady rate in real time, every half second what is due. An order is
visible in the table when the table's current snapshot, as the REST catalog serves it (what any
reader loads), counts its row: the topic has one partition and the ingestion commits in offset
order, so the n-th order produced is visible once the table holds n rows more than before. A
window appears when a consumer of `supplier-stats` first receives its (window start, supplier).
Measuring starts once both jobs have shown output for warm-up orders (a fresh job's first batches
take tens of seconds: JIT, catalog set-up); after the measured orders, orders keep coming for a
while so that the watermark closes their windows.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from bench.flink_peer import LiveWindowsPeer
from bench.measure import percentile
from lineage_assets import job_specs
from lineage_assets.datasets import LAKEHOUSE_ORDERS, SUPPLIER_STATS_LIVE, orders_avro_schema_json
from lineage_assets.generator import GeneratorConfig, generate_orders, produce_orders
from lineage_assets.resources.kafka import KafkaResource
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.settings import Settings
from lineage_assets.streaming.deployments import LocalDeployments
from lineage_assets.testing import pipeline_of_its_own

WINDOW_SECONDS = 5  # live_supplier_stats.py's window, as deployed
TICK_SECONDS = 0.5
TAIL_SECONDS = 15  # window (5 s) + watermark (5 s) + a trigger; closed windows then come out of no-data batches
WARM_UP_SECONDS = 300
JOBS = (LAKEHOUSE_ORDERS, SUPPLIER_STATS_LIVE)


def table_rows(settings: Settings) -> int:
    """Rows of the orders table's current snapshot, from the REST catalog (0 before the first commit)."""
    url = f"{settings.iceberg_catalog_url}/v1/namespaces/{settings.iceberg_namespace}/tables/orders"
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            metadata = json.load(response)["metadata"]
    except urllib.error.HTTPError as error:
        if error.code == 404:  # the ingestion creates the table when it starts
            return 0
        raise
    current = next(
        (s for s in metadata.get("snapshots", []) if s["snapshot-id"] == metadata.get("current-snapshot-id")), None
    )
    return int(current["summary"]["total-records"]) if current else 0


class Watch(threading.Thread):
    """Calls ``look`` until stopped; ``seen`` keeps the first wall time each thing it returns appeared."""

    def __init__(self, look, interval: float):
        super().__init__(daemon=True)
        self.look, self.interval = look, interval
        self.seen: dict = {}
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            things = self.look()
            now = time.time()
            for thing in things:
                self.seen.setdefault(thing, now)
            self.stopped.wait(self.interval)


def table_watch(settings: Settings, base_rows: int) -> Watch:
    """Sees order n (from 0) once the table holds ``base_rows + n + 1`` rows."""
    return Watch(lambda: range(table_rows(settings) - base_rows), interval=0.2)


def windows_watch(settings: Settings, topic: str) -> tuple[Watch, Consumer]:
    """Sees (window start, supplier) of each window record arriving on ``topic`` from now on."""
    consumer = Consumer(
        {"bootstrap.servers": settings.kafka_servers, "group.id": "bench-freshness", "enable.auto.commit": False}
    )
    partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    consumer.assign(
        [
            TopicPartition(topic, p, consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1])
            for p in partitions
        ]
    )

    def look():
        message = consumer.poll(0.2)  # returns as soon as a record is there
        if message is None or message.error() is not None:
            return []
        value = json.loads(message.value())
        return [(value["window_start"], value["supplier"])]

    return Watch(look, interval=0.0), consumer


def window_of(order: dict) -> tuple[str, str]:
    start = int(order["bid_time"].timestamp()) // WINDOW_SECONDS * WINDOW_SECONDS
    return dt.datetime.fromtimestamp(start, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), order["supplier"]


def committed_offsets(checkpoint: Path) -> dict:
    """Source offsets of the query's last committed micro-batch ({topic: {partition: offset}}), from its
    checkpoint: an idle query reports no progress, so its checkpoint is what says how far it got."""
    commits = (
        [int(f.name) for f in (checkpoint / "commits").glob("[0-9]*")] if (checkpoint / "commits").is_dir() else []
    )
    if not commits:
        return {}
    return json.loads((checkpoint / "offsets" / str(max(commits))).read_text().splitlines()[-1])


def caught_up(deployments: LocalDeployments, name: str, checkpoint: Path, topic: str, ends: dict[int, int]) -> bool:
    """The deployed query has started and has committed the topic up to ``ends``."""
    progress = deployments.folder(name) / "progress.jsonl"
    started = progress.exists() and '"started"' in progress.read_text()
    offsets = committed_offsets(checkpoint).get(topic, {})
    return started and all(int(offsets.get(str(p), 0)) >= end for p, end in ends.items())


def wait_until(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(1)
    return True


class RealTimeProducer:
    """Sends generated orders at a steady rate, each when its time comes (its Kafka timestamp), in
    batches of what is due every tick; remembers every order sent and when, in send order."""

    def __init__(self, settings: Settings, rate: int):
        self.settings, self.rate = settings, rate
        self.sent: list[tuple[dict, float]] = []

    def produce_for(self, seconds: float, until=lambda: False) -> list[tuple[dict, float]]:
        """Orders for ``seconds`` (or until ``until()`` holds at a tick); returns those sent, with their send time."""
        orders = list(
            generate_orders(
                GeneratorConfig(
                    count=int(self.rate * seconds),
                    seed=len(self.sent) + int(time.time()),
                    interval_seconds=1 / self.rate,
                    start=dt.datetime.now(dt.UTC) + dt.timedelta(seconds=TICK_SECONDS),
                )
            )
        )
        first, done, tick = len(self.sent), 0, 0
        start = orders[0].sent_at.timestamp()
        while done < len(orders) and not until():
            time.sleep(max(0.0, start + tick * TICK_SECONDS - time.time()))
            due = [o for o in orders[done:] if o.sent_at.timestamp() < start + (tick + 1) * TICK_SECONDS]
            now = time.time()
            produce_orders(due, self.settings)
            self.sent += [(o.record(), now) for o in due]  # valid orders only: the config has no bad_fraction
            done, tick = done + len(due), tick + 1
        return self.sent[first:]


def latencies(seen: dict, keys: list, sent: list[float]) -> tuple[list[float], int]:
    """Seconds from send to first seen, per key seen after its send; and how many were not."""
    measured = [seen[key] - at for key, at in zip(keys, sent) if key in seen and seen[key] >= at]
    return measured, len(keys) - len(measured)


def quantiles(values: list[float]) -> dict:
    if not values:
        return {"p50_s": None, "p95_s": None, "max_s": None}
    return {
        "p50_s": round(percentile(values, 0.5), 3),
        "p95_s": round(percentile(values, 0.95), 3),
        "max_s": round(max(values), 3),
    }


def run(environment: SettingsResource, quick: bool, seconds: int | None = None) -> dict:
    seconds = seconds or (10 if quick else 120)
    rate = 10 if quick else 20
    # Topics of its own, holding only this benchmark's valid orders, which both sides read from their
    # start: the stack's `orders` topic also holds the other benchmarks' bad records, which the project's
    # jobs dead-letter while the Flink peer's avro-confluent source fails on each and restarts, forever.
    settings = pipeline_of_its_own(environment.settings, "freshness")
    environment = SettingsResource.of(settings)
    kafka = KafkaResource(environment=environment)
    kafka.ensure_topics(settings.orders_topic, settings.supplier_stats_topic, settings.dead_letter_topic)
    kafka.register_value_schema(settings.orders_topic, orders_avro_schema_json())
    deployments = LocalDeployments(settings)
    triggers = {dataset.key: deployments.trigger(dataset.key) for dataset in JOBS}
    # The lab's windows job on the same stream, checkpointing as often as the live windows trigger
    # (a checkpoint does not hold its windows back: its Kafka sink writes at least once).
    peer = LiveWindowsPeer(
        settings,
        settings.state_dir / "bench-freshness",
        checkpoint_ms=max(1000, int(triggers[SUPPLIER_STATS_LIVE.key] * 1000)),
        parallelism=len(kafka.end_offsets(settings.orders_topic)),
    )
    watches: list[Watch] = []
    consumers: list[Consumer] = []
    try:
        peer.start()
        for dataset in JOBS:
            deployments.deploy(dataset.key)
        ends = kafka.end_offsets(settings.orders_topic)
        for dataset in JOBS:
            checkpoint = Path(job_specs.checkpoint(settings, dataset))  # the local stack's: a folder
            if not wait_until(
                lambda dataset=dataset, checkpoint=checkpoint: caught_up(
                    deployments, dataset.key, checkpoint, settings.orders_topic, ends
                ),
                300,
            ):
                raise TimeoutError(f"freshness: {dataset.key} did not catch up with the topic within 300 s")
        (window_watch, consumer), (peer_watch, peer_consumer) = (
            windows_watch(settings, topic) for topic in (settings.supplier_stats_topic, peer.output_topic)
        )
        consumers = [consumer, peer_consumer]
        rows = table_watch(settings, table_rows(settings))
        watches = [rows, window_watch, peer_watch]
        for watch in watches:
            watch.start()
        producer = RealTimeProducer(settings, rate)
        # A fresh job's first batches are slow (JVM warming up): measure once all three have shown output.
        warm_up = producer.produce_for(
            WARM_UP_SECONDS, until=lambda: all(watch.seen for watch in watches) or not peer.running()
        )
        if not peer.running():
            raise RuntimeError(peer.failure())
        measured = producer.produce_for(seconds)
        producer.produce_for(TAIL_SECONDS)
        positions = range(len(warm_up), len(warm_up) + len(measured))  # the n-th order sent is the table's n-th new row
        windows = [window_of(order) for order, _ in measured]
        wait_until(
            lambda: (
                all(n in rows.seen for n in positions)
                and all(w in watch.seen for w in windows for watch in (window_watch, peer_watch))
            ),
            120,
        )
    finally:
        for watch in watches:
            watch.stopped.set()
            watch.join()
        with ThreadPoolExecutor() as stopping:  # all at once: each stop waits for its job to exit
            list(stopping.map(deployments.stop, [dataset.key for dataset in JOBS]))
            stopping.submit(peer.stop)
    for each in consumers:
        each.close()
    sent = [at for _, at in measured]
    table, table_missed = latencies(rows.seen, list(positions), sent)
    window, window_missed = latencies(window_watch.seen, windows, sent)
    peer_window, peer_missed = latencies(peer_watch.seen, windows, sent)
    project, flink = quantiles(window), quantiles(peer_window)
    return {
        "name": "freshness",
        "target": "window on supplier-stats: project <= Flink peer at p50 and p95",
        "met": None
        if None in (project["p50_s"], flink["p50_s"])
        else project["p50_s"] <= flink["p50_s"] and project["p95_s"] <= flink["p95_s"],
        "orders": len(measured),
        "orders_per_s": rate,
        "trigger_seconds": triggers,
        "warm_up_s": round(len(warm_up) / rate, 1),
        "table": {**quantiles(table), "not_seen": table_missed},
        # An order whose window was out before it was sent came after the watermark closed it.
        "window": {**project, "not_seen_or_late": window_missed},
        "window_flink_peer": {
            **flink,
            "not_seen_or_late": peer_missed,
            "parallelism": peer.parallelism,
            "checkpoint_ms": peer.checkpoint_ms,
        },
    }


def summary(result: dict) -> str:
    table, window = result["table"], result["window"]
    return (
        f"produce -> visible in lakehouse/orders: p50 {table['p50_s']} s, p95 {table['p95_s']} s; "
        f"-> window on supplier-stats: p50 {window['p50_s']} s, p95 {window['p95_s']} s "
        f"({result['orders']} orders at {result['orders_per_s']}/s; triggers: "
        + ", ".join(f"{key} {seconds} s" for key, seconds in result["trigger_seconds"].items())
        + ")"
    )


def peer_summary(result: dict) -> str:
    peer = result["window_flink_peer"]
    return (
        f"-> window on its topic: p50 {peer['p50_s']} s, p95 {peer['p95_s']} s "
        f"(the same orders, a checkpoint every {peer['checkpoint_ms'] / 1000} s)"
    )

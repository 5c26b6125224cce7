"""The cluster profile's Kafka of three brokers (each also a KRaft controller): the pipeline's topics
replicated on all three, the lineage naming unchanged, writes that survive a broker killed outright,
and a continuous ingestion (on the profile's Spark cluster) that loses and doubles nothing while a
broker is down and back."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import signal
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from lineage_assets.datasets import LAKEHOUSE_ORDERS, ORDERS, iceberg_table_name
from lineage_assets.generator import GeneratorConfig, generate_orders, produce_orders
from lineage_assets.lineage.emitter import emitter_for
from lineage_assets.lineage.marquez import MarquezApi
from lineage_assets.resources.kafka import KafkaResource
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.stack.services.base import StackError
from lineage_assets.stack.supervisor import Supervisor
from lineage_assets.streaming.deployments import LocalDeployments
from tests.cluster.conftest import KAFKA_NODES
from tests.conftest import wait_for
from tests.integration.test_deployments import orders_topic_ready, rows_and_orders


def test_the_orders_topic_is_partitioned_and_replicated_on_every_broker(cluster_profile):
    settings, _ = cluster_profile
    assert settings.kafka_servers.count(",") == 2
    KafkaResource(environment=SettingsResource.of(settings)).ensure_topics(
        settings.orders_topic, settings.dead_letter_topic
    )
    admin = AdminClient({"bootstrap.servers": settings.kafka_servers})
    # A new topic reaches every broker's metadata a moment after it is created.
    topics = wait_for(
        lambda: (
            (t := admin.list_topics(timeout=10).topics).keys() >= {settings.orders_topic, settings.dead_letter_topic}
            and t
        ),
        30,
        "the topics in the metadata",
        poll=0.5,
    )
    orders, dead = topics[settings.orders_topic], topics[settings.dead_letter_topic]
    assert len(orders.partitions) == 3 and len(dead.partitions) == 1
    assert all(sorted(p.replicas) == [1, 2, 3] for p in [*orders.partitions.values(), *dead.partitions.values()])
    # The lineage names a topic by the first bootstrap server: the same with one broker or three.
    assert ORDERS.identity(settings) == ORDERS.identity(dataclasses.replace(settings, kafka_brokers=1))


def test_acknowledged_writes_survive_a_broker_killed_outright_and_it_rejoins(cluster_profile):
    settings, supervisor = cluster_profile
    topic = "survivors"
    KafkaResource(environment=SettingsResource.of(settings)).ensure_topics(topic)
    producer = Producer({"bootstrap.servers": settings.kafka_servers, "acks": "all", "enable.idempotence": True})

    def produce(numbers: range) -> None:
        failed = []
        for n in numbers:
            producer.produce(
                topic,
                key=str(n),
                value=json.dumps({"n": n}),
                on_delivery=lambda error, message: error and failed.append(error),
            )
        producer.flush(60)
        assert not failed, failed

    produce(range(0, 500))
    (killed,) = [status.pid for status in supervisor.status(["kafka-2"])]
    os.kill(killed, signal.SIGKILL)
    produce(range(500, 1000))  # two of three replicas in sync: min.insync.replicas=2 still holds
    supervisor.up(["kafka-2"])
    wait_for(lambda: all(s.healthy for s in supervisor.status(KAFKA_NODES)), 60, "the killed broker to rejoin")

    consumer = Consumer(
        {
            "bootstrap.servers": settings.kafka_servers,
            "group.id": "survivors-check",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    seen: list[int] = []
    deadline = time.monotonic() + 60
    try:
        while len(seen) < 1000 and time.monotonic() < deadline:
            seen += [json.loads(m.value())["n"] for m in consumer.consume(500, timeout=2) if not m.error()]
    finally:
        consumer.close()
    assert sorted(seen) == list(range(1000))  # none lost, none twice


def test_a_continuous_ingestion_loses_and_doubles_nothing_while_a_broker_is_down_and_back(cluster_profile, spark):
    settings, supervisor = cluster_profile
    orders_topic_ready(settings)
    orders = list(
        generate_orders(GeneratorConfig(count=300, seed=1515, start=dt.datetime(2026, 11, 3, 9, tzinfo=dt.UTC)))
    )
    ids = [order.key for order in orders]
    table = iceberg_table_name(settings, "orders")

    def produce(part) -> None:
        produce_orders(part, settings)

    def ingested() -> tuple[int, int]:
        return rows_and_orders(spark, table, ids)

    deployments = LocalDeployments(settings, running_interval=3, trigger_seconds=2)
    produce(orders[:100])
    assert deployments.deploy(LAKEHOUSE_ORDERS.key) == "started"
    try:
        run_id = deployments.status(LAKEHOUSE_ORDERS.key).run_id
        wait_for(lambda: ingested()[1] >= 100, 180, "the first orders in Iceberg")

        (broker,) = supervisor.status(["kafka-2"])
        killed_at = time.monotonic()
        os.kill(broker.pid, signal.SIGKILL)
        produce(orders[100:200])  # to the two brokers left; the leaders kafka-2 had move
        wait_for(lambda: ingested()[1] >= 200, 180, "the orders produced while kafka-2 was down")
        recovered = time.monotonic() - killed_at
        assert deployments.status(LAKEHOUSE_ORDERS.key).running

        supervisor.up(["kafka-2"])
        produce(orders[200:])
        wait_for(lambda: ingested()[1] >= len(ids), 180, "the orders produced after kafka-2 was back")
        assert deployments.stop(LAKEHOUSE_ORDERS.key, drain=True) == "stopped"
    finally:
        deployments.stop(LAKEHOUSE_ORDERS.key)
    rows, distinct = ingested()
    print(
        f"\nbroker killed during the ingestion: {len(ids)} produced, {distinct} in the table, {rows - distinct} "
        f"duplicates; the orders sent while it was down were in the table {recovered:.1f} s after the kill"
    )
    assert (rows, distinct) == (len(ids), len(ids))
    # The deployment ran through the outage: one run, ended once by the drain, as Marquez shows it too.
    emitter = emitter_for(settings)
    kinds = [e["eventType"] for e in emitter.events() if e["run"]["runId"] == run_id]
    assert kinds[0] == "START" and kinds[-1] == "COMPLETE" and set(kinds) == {"START", "RUNNING", "COMPLETE"}
    assert emitter.flush(timeout=90)
    assert MarquezApi.of(settings).run(run_id)["state"] == "COMPLETED"


def test_a_different_broker_count_on_a_formatted_kafka_is_a_clear_error(cluster_profile):
    settings, supervisor = cluster_profile
    single = Supervisor(dataclasses.replace(settings, kafka_brokers=1))
    single.down(["kafka"])
    try:
        with pytest.raises(
            StackError, match="formatted for a Kafka of 3 broker\\(s\\), LINEAGE_ASSETS_KAFKA_BROKERS=1"
        ):
            single.up(["kafka"])
    finally:
        supervisor.up(["kafka"])  # the profile whole again

"""A local Kafka of three brokers (each also a KRaft controller): the pipeline's topics replicated
on all three, the lineage naming unchanged, and writes that survive a broker killed outright."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from lineage_assets.datasets import ORDERS
from lineage_assets.resources.kafka import KafkaResource
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.stack.services import StackError
from lineage_assets.stack.supervisor import Supervisor
from tests.conftest import isolated_settings, wait_for

NODES = ["kafka", "kafka-2", "kafka-3"]


@pytest.fixture(scope="module")
def kafka_cluster(tmp_path_factory):
    settings = isolated_settings("kafka-cluster", offset=14000, state_dir=tmp_path_factory.mktemp("kafka-cluster"),
                                 kafka_brokers=3, orders_partitions=3)
    supervisor = Supervisor(settings, progress=print)
    assert [s.name for s in supervisor.selected() if s.name.startswith("kafka")] == NODES
    supervisor.up(NODES)
    yield settings, supervisor
    supervisor.down(NODES)


def test_the_orders_topic_is_partitioned_and_replicated_on_every_broker(kafka_cluster):
    settings, _ = kafka_cluster
    assert settings.kafka_servers.count(",") == 2
    assert KafkaResource(environment=SettingsResource.of(settings)).ensure_topics(
        settings.orders_topic, settings.dead_letter_topic) == [settings.orders_topic, settings.dead_letter_topic]
    admin = AdminClient({"bootstrap.servers": settings.kafka_servers})
    # A new topic reaches every broker's metadata a moment after it is created.
    topics = wait_for(lambda: (t := admin.list_topics(timeout=10).topics).keys() >= {settings.orders_topic, settings.dead_letter_topic}
                      and t, 30, "the topics in the metadata", poll=0.5)
    orders, dead = topics[settings.orders_topic], topics[settings.dead_letter_topic]
    assert len(orders.partitions) == 3 and len(dead.partitions) == 1
    assert all(sorted(p.replicas) == [1, 2, 3] for p in [*orders.partitions.values(), *dead.partitions.values()])
    # The lineage names a topic by the first bootstrap server: the same with one broker or three.
    assert ORDERS.identity(settings) == ORDERS.identity(dataclasses.replace(settings, kafka_brokers=1))


def test_acknowledged_writes_survive_a_broker_killed_outright_and_it_rejoins(kafka_cluster):
    settings, supervisor = kafka_cluster
    topic = "survivors"
    KafkaResource(environment=SettingsResource.of(settings)).ensure_topics(topic)
    producer = Producer({"bootstrap.servers": settings.kafka_servers, "acks": "all", "enable.idempotence": True})

    def produce(numbers: range) -> None:
        failed = []
        for n in numbers:
            producer.produce(topic, key=str(n), value=json.dumps({"n": n}),
                             on_delivery=lambda error, message: error and failed.append(error))
        producer.flush(60)
        assert not failed, failed

    produce(range(0, 500))
    (killed,) = [status.pid for status in supervisor.status(["kafka-2"])]
    os.kill(killed, signal.SIGKILL)
    produce(range(500, 1000))  # two of three replicas in sync: min.insync.replicas=2 still holds
    supervisor.up(["kafka-2"])
    wait_for(lambda: all(s.healthy for s in supervisor.status(NODES)), 60, "the killed broker to rejoin")

    consumer = Consumer({"bootstrap.servers": settings.kafka_servers, "group.id": "survivors-check",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen: list[int] = []
    deadline = time.monotonic() + 60
    try:
        while len(seen) < 1000 and time.monotonic() < deadline:
            seen += [json.loads(m.value())["n"] for m in consumer.consume(500, timeout=2) if not m.error()]
    finally:
        consumer.close()
    assert sorted(seen) == list(range(1000))  # none lost, none twice


def test_a_different_broker_count_on_a_formatted_kafka_is_a_clear_error(kafka_cluster):
    settings, _ = kafka_cluster
    single = Supervisor(dataclasses.replace(settings, kafka_brokers=1))
    single.down(["kafka"])
    with pytest.raises(StackError, match="formatted for a Kafka of 3 broker\\(s\\), LINEAGE_ASSETS_KAFKA_BROKERS=1"):
        single.up(["kafka"])

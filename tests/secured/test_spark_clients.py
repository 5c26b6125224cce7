"""Spark's Kafka source, given a client properties file as Kafka users write it, reads the tls profile's
SASL_SSL listener as its PLAIN and SCRAM users and its mutual-TLS listener with a client certificate:
the Java client's options made from the same file librdkafka reads."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from lineage_assets.connections import kafka_conf, librdkafka_conf, spark_kafka_options
from lineage_assets.kafka_properties import read_kafka_properties
from lineage_assets.stack import security


@pytest.fixture(scope="module")
def topic(secured) -> str:
    """A topic of three records, written by the profile's SCRAM user."""
    name = f"spark-clients-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(kafka_conf(secured))
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=30)
    producer = Producer(kafka_conf(secured))
    for number in range(3):
        producer.produce(name, value=f"record {number}".encode())
    assert producer.flush(30) == 0
    return name


@pytest.mark.parametrize(
    "properties", [security.CLIENT_PROPERTIES, security.PLAIN_PROPERTIES, security.MTLS_PROPERTIES]
)
def test_spark_reads_the_secured_kafka_with_the_options_a_properties_file_gives(secured, spark, topic, properties):
    found = read_kafka_properties(secured.security_dir / properties)
    servers = found.get("bootstrap.servers", secured.kafka_servers)
    options = spark_kafka_options(found, servers)
    assert "kafka.sasl.jaas.config" in options or options["kafka.ssl.keystore.type"] == "PEM"
    read = (
        spark.read.format("kafka")
        .options(**options)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("CAST(value AS STRING) AS value")
    )
    assert sorted(row.value for row in read.collect()) == ["record 0", "record 1", "record 2"]
    assert librdkafka_conf(found, servers)["security.protocol"] == found["security.protocol"]

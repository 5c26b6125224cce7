"""Where a Kafka topic ends, through confluent-kafka's consumer: the assets and the Spark jobs that
write a topic measure what a run wrote with it."""

from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition

from lineage_assets.connections import LibrdkafkaConf


def end_offsets(kafka: LibrdkafkaConf, topic: str) -> dict[int, int]:
    """Partition -> next offset to be written (records in the partition, for a topic never truncated),
    asked through the client configuration ``kafka`` (``connections.kafka_conf``)."""
    consumer = Consumer({**kafka, "group.id": "lineage-assets-offsets", "enable.auto.commit": False})
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics[topic]
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in metadata.partitions}
    finally:
        consumer.close()

"""Kafka and the schema registry, through confluent-kafka's admin and registry clients."""

from __future__ import annotations

from typing import TYPE_CHECKING

import dagster as dg
from confluent_kafka.admin import AdminClient, NewTopic

from lineage_assets import topics
from lineage_assets.connections import kafka_conf, registry_client_conf
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.source_schemas import dead_letter_topic_of, value_subject

if TYPE_CHECKING:
    from confluent_kafka.schema_registry import RegisteredSchema, SchemaRegistryClient


class RegistryUnavailable(RuntimeError):
    """The schema registry could not be reached or refused a request; the message names its URL."""


class KafkaResource(dg.ConfigurableResource):
    environment: SettingsResource

    def ensure_topics(self, *topics: str) -> list[str]:
        """Create the topics that do not exist yet (the orders topic with ``orders_partitions``, the
        others with one; all with ``topic_replication``; the suppliers topic compacted, keeping each
        supplier's latest record only); returns the ones created."""
        if not topics:
            return []
        settings = self.environment.settings
        admin = AdminClient(kafka_conf(settings))
        existing = set(admin.list_topics(timeout=10).topics)
        missing = [topic for topic in topics if topic not in existing]
        if missing:
            futures = admin.create_topics(
                [
                    NewTopic(
                        topic,
                        num_partitions=settings.orders_partitions if topic == settings.orders_topic else 1,
                        replication_factor=settings.topic_replication,
                        config={"cleanup.policy": "compact"} if topic == settings.suppliers_topic else {},
                    )
                    for topic in missing
                ]
            )
            for future in futures.values():
                future.result(timeout=30)
        return missing

    def ensure_orders_topics(self) -> list[str]:
        """The orders topic and the two the pipeline writes beside it, live statistics and dead letters."""
        settings = self.environment.settings
        return self.ensure_topics(settings.orders_topic, settings.supplier_stats_topic, settings.dead_letter_topic)

    def ensure_suppliers_topics(self) -> list[str]:
        """The supplier dimension's compacted topic and its dead letters' topic."""
        topic = self.environment.settings.suppliers_topic
        return self.ensure_topics(topic, dead_letter_topic_of(topic))

    def end_offsets(self, topic: str) -> dict[int, int]:
        """Partition -> next offset to be written (``topics.end_offsets``)."""
        return topics.end_offsets(kafka_conf(self.environment.settings), topic)

    def registry(self) -> SchemaRegistryClient:
        # Imported here: the registry client brings an async HTTP and OAuth stack that loading the
        # definitions (every Dagster run and the command line) would otherwise pay for.
        from confluent_kafka.schema_registry import SchemaRegistryClient

        return SchemaRegistryClient(registry_client_conf(self.environment.settings))

    def register_value_schema(self, topic: str, schema_json: str) -> RegisteredSchema:
        """Register (or find) the topic's value schema; returns it with its id and version."""
        from confluent_kafka.schema_registry import Schema
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        url, subject = self.environment.settings.schema_registry_url, value_subject(topic)
        try:
            registry = self.registry()
            try:
                registry.register_schema(subject, Schema(schema_json, "AVRO"))
            except SchemaRegistryError as error:
                # Apicurio refuses the second of two registrations of a new subject that race; the
                # other's is the same schema, found below.
                if error.http_status_code != 409 or "already exists" not in str(error.error_message):
                    raise
            return registry.lookup_schema(subject, Schema(schema_json, "AVRO"))
        except Exception as error:
            raise RegistryUnavailable(
                f"schema registry at {url} (LINEAGE_ASSETS_REGISTRY_URL) refused subject {subject}: {error}"
            ) from error

"""Kafka in KRaft mode: one node, or three (``kafka_brokers``), each a broker and a controller."""

from __future__ import annotations

import base64
import subprocess
import uuid

from lineage_assets.settings import Settings
from lineage_assets.stack.probes import port_open
from lineage_assets.stack.services.base import (
    CONF_DIR,
    Service,
    StackError,
    java,
    render,
)


def _kafka_cluster_id(settings: Settings) -> str:
    """The id every node is formatted with: node 1's, chosen once."""
    record = settings.state_dir / "kafka" / "cluster-id"
    formatted = settings.state_dir / "kafka" / "log" / "meta.properties"
    if not record.exists():
        existing = (
            [line.split("=", 1)[1] for line in formatted.read_text().splitlines() if line.startswith("cluster.id=")]
            if formatted.exists()
            else []
        )
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(
            existing[0] if existing else base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        )
    return record.read_text().strip()


def _prepare_kafka_node(settings: Settings, node: int) -> None:
    data = settings.state_dir / _kafka_name(node)
    broker, controller = settings.kafka_node_ports(node)
    voters = ",".join(
        f"{n}@{settings.host}:{settings.kafka_node_ports(n)[1]}" for n in range(1, settings.kafka_brokers + 1)
    )
    # The quorum is fixed when the nodes are formatted: a different broker count needs a fresh state.
    formatted = (data / "log" / "meta.properties").exists()
    formatted_for = data / "brokers"
    if formatted and not formatted_for.exists():
        formatted_for.write_text("1")  # formatted before the broker count was a setting: a single node
    if formatted and formatted_for.read_text().strip() != str(settings.kafka_brokers):
        raise StackError(
            f"{_kafka_name(node)}: formatted for a Kafka of {formatted_for.read_text().strip()} broker(s), "
            f"LINEAGE_ASSETS_KAFKA_BROKERS={settings.kafka_brokers}; start from a fresh state (`make clean`) "
            f"or set it back"
        )
    replication = settings.topic_replication  # the brokers' own topics too
    config = render(
        "kafka-server.properties",
        data / "server.properties",
        node_id=node,
        voters=voters,
        host=settings.host,
        kafka_port=broker,
        kafka_controller_port=controller,
        data_dir=data / "log",
        replication=replication,
        min_isr=max(1, replication - 1),
    )
    if formatted:
        return  # formatted once; formatting again would wipe the topics
    subprocess.run(
        [
            java(),
            "-cp",
            KAFKA.jar_classpath(settings),
            f"-Dlog4j2.configurationFile={CONF_DIR / 'jvm-log4j2.properties'}",
            # `=` form: a base64 id may start with "-" and must not be read as an option.
            "kafka.tools.StorageTool",
            "format",
            f"--cluster-id={_kafka_cluster_id(settings)}",
            f"--config={config}",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    formatted_for.write_text(str(settings.kafka_brokers))


def _kafka_node_healthy(settings: Settings, node: int) -> bool:
    """The node answers on its broker listener with metadata that lists it (loaded, and in the cluster)."""
    from confluent_kafka.admin import AdminClient

    broker, _ = settings.kafka_node_ports(node)
    if not port_open(settings.host, broker):
        return False
    try:
        metadata = AdminClient({"bootstrap.servers": f"{settings.host}:{broker}"}).list_topics(timeout=3)
    except Exception:  # the broker answers only once its metadata is loaded
        return False
    return node in metadata.brokers


def _kafka_name(node: int) -> str:
    return "kafka" if node == 1 else f"kafka-{node}"


def kafka_node(node: int) -> Service:
    def command(settings: Settings) -> list[str]:
        return [
            java(),
            "-Xms256m",
            "-Xmx1g",
            "-XX:+UseG1GC",
            f"-Dlog4j2.configurationFile={CONF_DIR / 'jvm-log4j2.properties'}",
            "-cp",
            service.jar_classpath(settings),
            "kafka.Kafka",
            str(settings.state_dir / _kafka_name(node) / "server.properties"),
        ]

    service = Service(
        name=_kafka_name(node),
        jars="kafka",  # every node runs the same build
        replaced_by=("kafka_bootstrap",),
        wanted=lambda s: node <= s.kafka_brokers,
        ports=lambda s: list(s.kafka_node_ports(node)),
        command=command,
        healthy=lambda s: _kafka_node_healthy(s, node),
        address=lambda s: f"{s.host}:{s.kafka_node_ports(node)[0]}",
        prepare=lambda s: _prepare_kafka_node(s, node),
    )
    return service


KAFKA, *KAFKA_NODES = (kafka_node(1), kafka_node(2), kafka_node(3))

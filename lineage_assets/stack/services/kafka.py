"""Kafka in KRaft mode: one node, or three (``kafka_brokers``), each a broker and a controller."""

from __future__ import annotations

import base64
import subprocess
import uuid

from lineage_assets.connections import kafka_conf
from lineage_assets.private_files import write_private
from lineage_assets.settings import PLAINTEXT, Settings
from lineage_assets.stack import security
from lineage_assets.stack.probes import port_open
from lineage_assets.stack.services.base import (
    CONF_DIR,
    Service,
    StackError,
    java,
    render,
    rendered,
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
    # So are its users (the tls profile's SCRAM user is added then): a different profile needs one too.
    profile = data / "security"
    formatted_profile = profile.read_text().strip() if profile.exists() else PLAINTEXT
    if formatted and formatted_profile != settings.security:
        raise StackError(
            f"{_kafka_name(node)}: formatted for the {formatted_profile} profile, "
            f"LINEAGE_ASSETS_SECURITY={settings.security}; start from a fresh state (`make clean`) or set it back"
        )
    replication = settings.topic_replication  # the brokers' own topics too
    config = render(
        "kafka-server.properties",
        data / "server.properties",
        node_id=node,
        voters=voters,
        data_dir=data / "log",
        replication=replication,
        min_isr=max(1, replication - 1),
        **_listeners(settings, node),
    )
    if formatted:
        return  # formatted once; formatting again would wipe the topics
    arguments = [
        "kafka.tools.StorageTool",
        "format",
        # `=` form: a base64 id may start with "-" and must not be read as an option.
        f"--cluster-id={_kafka_cluster_id(settings)}",
        f"--config={config}",
    ]
    if settings.tls:
        user, password = security.credentials(settings, security.CLIENT_PROPERTIES)
        arguments.append(f"--add-scram=SCRAM-SHA-512=[name={user},password={password}]")
    # The tool's arguments (a password among them in the tls profile) from an owner-only argument file
    # that the java launcher reads, so that none of them is on the process's command line.
    argument_file = write_private(data / "format.args", "".join(f"{_java_quoted(each)}\n" for each in arguments))
    try:
        subprocess.run(
            [
                java(),
                "-cp",
                KAFKA.jar_classpath(settings),
                f"-Dlog4j2.configurationFile={CONF_DIR / 'jvm-log4j2.properties'}",
                f"@{argument_file}",
            ],
            check=True,
            capture_output=True,
            text=True,
        )
    finally:
        argument_file.unlink()
    formatted_for.write_text(str(settings.kafka_brokers))
    profile.write_text(settings.security)


def _java_quoted(argument: str) -> str:
    """One argument as a java launcher's argument file holds it."""
    return '"' + argument.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _listeners(settings: Settings, node: int) -> dict[str, str]:
    """Node ``node``'s listeners: plaintext; or, in the tls profile, clients on SASL_SSL and the nodes
    among themselves (and certificate clients) on mutual TLS, with the settings of both."""
    broker, controller = settings.kafka_node_ports(node)
    host = settings.host
    if not settings.tls:
        return {
            "listeners": f"PLAINTEXT://{host}:{broker},CONTROLLER://{host}:{controller}",
            "advertised_listeners": f"PLAINTEXT://{host}:{broker}",
            "inter_broker_listener": "PLAINTEXT",
            "protocol_map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "security": "",
        }
    mtls = security.mtls_port(settings, node)
    plain_user, plain_password = security.credentials(settings, security.PLAIN_PROPERTIES)
    return {
        "listeners": f"SASL_SSL://{host}:{broker},MTLS://{host}:{mtls},CONTROLLER://{host}:{controller}",
        "advertised_listeners": f"SASL_SSL://{host}:{broker},MTLS://{host}:{mtls}",
        "inter_broker_listener": "MTLS",
        "protocol_map": "CONTROLLER:SSL,MTLS:SSL,SASL_SSL:SASL_SSL",
        "security": rendered(
            "kafka-tls.properties",
            keystore=security.server_pem(settings),
            truststore=settings.security_dir / security.CA,
            plain_user=plain_user,
            plain_password=plain_password,
        ),
    }


def _kafka_node_healthy(settings: Settings, node: int) -> bool:
    """The node answers on its broker listener with metadata that lists it (loaded, and in the cluster)."""
    from confluent_kafka.admin import AdminClient

    broker, _ = settings.kafka_node_ports(node)
    if not port_open(settings.host, broker):
        return False
    try:
        # As the project's clients connect (the tls profile's SCRAM user), to this node only.
        conf: dict[str, str | int | float | bool] = {
            **kafka_conf(settings),
            "bootstrap.servers": f"{settings.host}:{broker}",
        }
        metadata = AdminClient(conf).list_topics(timeout=3)
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
        ports=lambda s: [*s.kafka_node_ports(node), *([security.mtls_port(s, node)] if s.tls else [])],
        command=command,
        healthy=lambda s: _kafka_node_healthy(s, node),
        address=lambda s: f"{s.host}:{s.kafka_node_ports(node)[0]}",
        prepare=lambda s: _prepare_kafka_node(s, node),
    )
    return service


KAFKA, *KAFKA_NODES = (kafka_node(1), kafka_node(2), kafka_node(3))

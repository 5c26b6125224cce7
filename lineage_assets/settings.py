"""The one settings object: addresses, ports, names and folders, each overridable from the environment.

Every field reads ``LINEAGE_ASSETS_<FIELD NAME IN CAPITALS>`` (for example ``LINEAGE_ASSETS_KAFKA_PORT``):
``settings_environment`` reads and writes those variables, ``settings_validation`` checks their values.
Everything else (the local stack, Spark configuration, Dagster resources, dataset identity, the
OpenLineage transport) derives from an instance of :class:`Settings`, never from its own constants.
The defaults describe the embedded local stack on 127.0.0.1; pointing the project at real services
means overriding the address fields (``kafka_bootstrap``, ``s3_endpoint``, ...).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lineage_assets.kafka_properties import read_kafka_properties

ENV_PREFIX = "LINEAGE_ASSETS_"
SECRETS_FILE_VARIABLE = ENV_PREFIX + "SECRETS_FILE"
PROJECT_ROOT = Path(__file__).resolve().parent.parent
MARQUEZ_RELEASE_URL = "https://github.com/MarquezProject/marquez/archive/refs/tags/0.51.1.tar.gz"


PLAINTEXT, TLS = "plaintext", "tls"
SECURITY_PROFILES = (PLAINTEXT, TLS)
# In the tls profile a TLS proxy takes the registry's, the catalog's and Marquez's ports, and each
# of them listens on loopback this much higher.
BEHIND_PROXY_OFFSET = 1000
# What the tls profile's stack writes into its folder for the clients.
PROFILE_SECRETS = "secrets.env"
PROFILE_CA = "ca.pem"
PROFILE_CLIENT_PROPERTIES = "client.properties"
# The tls profile's OAuth2 token server (Keycloak): its realm, and the scope a token for the catalog
# carries (`openid`: the proxy checks a token at the realm's userinfo endpoint, which requires it).
TOKEN_SERVER_REALM = "lineage-assets"
PROFILE_CATALOG_SCOPE = "openid"


class SettingsError(ValueError):
    """Settings that cannot work: one line per problem, each naming its variable and value."""


def _setting(default: Any, help: str, secret: bool = False) -> Any:
    return field(default=default, metadata={"help": help, "secret": secret})


@dataclass(frozen=True)
class Settings:
    host: str = _setting("127.0.0.1", "interface every local service binds to")
    state_dir: Path = _setting(PROJECT_ROOT / ".state", "pid files, logs and data of the local stack")
    cache_dir: Path = _setting(PROJECT_ROOT / ".cache", "downloaded jars and built servers (filled by `make setup`)")
    marquez_source: str = _setting(
        MARQUEZ_RELEASE_URL,
        "Marquez 0.51.1 source release that `make setup` builds: its upstream URL, a mirror's URL or a local "
        "path of the same archive (checked against its sha256)",
    )

    kafka_port: int = _setting(19092, "Kafka broker listener (broker n of the local cluster: this + 2(n - 1))")
    kafka_controller_port: int = _setting(19093, "Kafka KRaft controller listener (node n: this + 2(n - 1))")
    s3_port: int = _setting(19000, "s3proxy (S3 API)")
    registry_port: int = _setting(18081, "schema registry (Confluent-compatible API)")
    postgres_port: int = _setting(15432, "PostgreSQL (the Iceberg catalog's store)")
    iceberg_rest_port: int = _setting(18181, "Iceberg REST catalog server")
    marquez_port: int = _setting(15000, "Marquez API")
    marquez_admin_port: int = _setting(15001, "Marquez admin (health checks, metrics)")
    marquez_web_port: int = _setting(13001, "Marquez web UI (3000 is Dagster's)")
    token_server_port: int = _setting(
        18443, "the tls profile's OAuth2 token server (Keycloak, HTTPS) that issues the catalog's tokens"
    )
    dagster_port: int = _setting(
        3000, "Dagster webserver (`make dev`), where `lineage reached --rematerialize` launches its backfills"
    )
    dagster_code_port: int = _setting(
        14000, "Dagster code-location gRPC server of the project's definitions (dagster=services)"
    )
    spark_cluster_port: int = _setting(17077, "master of the local Spark standalone cluster (opt-in: see spark_master)")
    spark_cluster_web_port: int = _setting(
        17080, "the local Spark master's web UI; worker n listens on this + 2n - 1 and serves its UI on this + 2n"
    )

    kafka_bootstrap: str = _setting("", "Kafka bootstrap servers; empty = the local brokers")
    s3_endpoint: str = _setting("", "S3 endpoint URL; empty = the local s3proxy")
    s3_access_key: str = _setting("local-access-key", "S3 access key", secret=True)
    s3_secret_key: str = _setting("local-secret-key", "S3 secret key", secret=True)
    s3_region: str = _setting("us-east-1", "S3 region")
    registry_url: str = _setting("", "schema registry URL (Confluent API); empty = the local one")
    catalog_url: str = _setting("", "Iceberg REST catalog URL; empty = the local one")
    marquez_url: str = _setting("", "Marquez base URL; empty = the local stack's Marquez")
    kafka_client_properties: str = _setting(
        "",
        "Kafka client properties file, as Kafka users write it (security.protocol, sasl.mechanism, "
        "sasl.jaas.config or sasl.username/sasl.password, ssl.* for TLS and mTLS), with the schema registry's "
        "basic.auth.user.info; given to every Kafka and registry client. Owner-only when it holds a secret. "
        "Empty = plaintext (the tls profile: the file its stack writes)",
    )
    ca_file: str = _setting(
        "",
        "PEM file of the certificate authorities the HTTPS services chain to (registry, S3, catalog, Marquez), "
        "trusted besides the system's; empty = the system's only (the tls profile: its own CA)",
    )
    catalog_token: str = _setting("", "bearer token of the Iceberg REST catalog (its client's `token`)", secret=True)
    catalog_credential: str = _setting(
        "",
        "OAuth2 client credentials of the Iceberg REST catalog, CLIENT_ID:SECRET (its client's `credential`)",
        secret=True,
    )
    catalog_oauth2_server_uri: str = _setting(
        "", "token endpoint for catalog_credential (the client's `oauth2-server-uri`); empty = the catalog's own"
    )
    catalog_scope: str = _setting("", "OAuth2 scope asked for with catalog_credential; empty = the client's default")
    marquez_api_key: str = _setting(
        "",
        "API key for Marquez (sent as a bearer token) when the project delivers to it and reads it; a backend "
        "configured in openlineage.yml or OPENLINEAGE__* carries its own `auth`",
        secret=True,
    )
    security: str = _setting(
        "plaintext",
        "the local stack's profile: plaintext, or tls (Kafka with SASL_SSL listeners and SCRAM users only, S3 "
        "over HTTPS, the registry, catalog and Marquez behind a TLS proxy that requires their credentials; "
        "certificates, client properties and secrets generated under STATE_DIR/security)",
    )
    postgres_user: str = _setting("postgres", "PostgreSQL user of the local stack's databases")
    postgres_password: str = _setting("", "PostgreSQL password (the local stack trusts loopback)", secret=True)
    secrets_file: str = _setting(
        "",
        "owner-only file of secret settings, a LINEAGE_ASSETS_<NAME>=value line each, read for those the "
        "environment lacks: how the project's containers get them (`docker inspect` shows an environment)",
    )

    kafka_brokers: int = _setting(
        1,
        "brokers of the local Kafka: 1, or 3 (each also a KRaft controller, a quorum of three); "
        "a change needs a fresh state (`make clean`)",
    )
    kafka_replication_factor: int = _setting(
        0, "replication factor of the topics the pipeline creates; 0 = as many brokers as the local Kafka has, up to 3"
    )
    orders_partitions: int = _setting(
        1, "partitions of the orders topic when the pipeline creates it (keyed by order_id: per-key order holds)"
    )
    orders_topic: str = _setting("orders", "the source topic")
    max_records_per_batch: int = _setting(
        0,
        "most records one micro-batch of a streaming job reads (Kafka's "
        "maxOffsetsPerTrigger); 0 = all that are available. Bounds the batches "
        "of a job that catches up after downtime",
    )
    supplier_stats_topic: str = _setting("supplier-stats", "per-supplier window statistics topic")
    dead_letter_topic: str = _setting("orders-dlq", "records that could not be decoded or cast")
    suppliers_topic: str = _setting("suppliers", "the supplier dimension's compacted topic, keyed by supplier")
    archive_bucket: str = _setting("archive", "bucket of the raw archive")
    archive_prefix: str = _setting("orders", "key prefix of the raw archive inside its bucket")
    warehouse_bucket: str = _setting("warehouse", "bucket of the Iceberg warehouse")
    catalog_name: str = _setting("lakehouse", "Spark catalog name of the Iceberg catalog")
    catalog_database: str = _setting("iceberg", "PostgreSQL database behind the local REST catalog")
    iceberg_namespace: str = _setting("default", "Iceberg namespace of the tables")
    marquez_database: str = _setting("marquez", "PostgreSQL database of the local Marquez")
    dagster_database: str = _setting(
        "dagster",
        "prefix of the PostgreSQL databases of Dagster instances (runs, event logs, ticks): each instance "
        "folder has one of its own, PREFIX_ and 12 hex digits of the folder's path",
    )
    marquez_retention_days: int = _setting(
        0,
        "days the local Marquez keeps runs, versions and events (its own retention job, hourly); "
        "0 = keep all. Its job list and lineage graph cost grows with what it holds",
    )
    snapshot_retention_hours: int = _setting(
        6,
        "hours of snapshots the lakehouse tables keep for time travel: the hourly lakehouse_maintenance "
        "job expires older ones, always keeping the last SNAPSHOTS_KEPT. Each snapshot kept makes every commit "
        "slower (a deployment committing every 5 s makes 720 an hour)",
    )
    snapshots_kept: int = _setting(
        100,
        "snapshots each lakehouse table keeps whatever their age; at least 2: a restarted stream looks its "
        "last batch's snapshot up among them, and only that stream and the hourly compaction commit to `orders`",
    )
    upkeep_schedule: str = _setting(
        "23 * * * *",
        "cron schedule (UTC) on which Dagster's daemon starts the lakehouse_maintenance job",
    )
    orphan_file_age_hours: int = _setting(
        72,
        "hours a file in a lakehouse table's location that nothing in the table references must be old "
        "before the hourly lakehouse_maintenance job deletes it (the files of failed writes); at least 24, "
        "and longer than any write takes, since a write's files are unreferenced until it commits",
    )

    spark_master: str = _setting(
        "local[2]",
        "Spark master URL for the jobs; spark://HOST:SPARK_CLUSTER_PORT (see "
        "`lineage-assets settings`) also makes the stack run that cluster",
    )
    spark_driver_memory: str = _setting("2g", "driver memory of the Spark jobs")
    spark_java_options: str = _setting(
        "",
        "JVM options added to the Spark drivers' and executors' own. -XX:TieredStopAtLevel=1 (the JIT's quick "
        "tier only) makes a short job's driver spend about 40% less CPU, at the cost of slower long jobs; "
        "the test stack sets it",
    )
    spark_worker_cores: int = _setting(
        4,
        "cores each worker of the local Spark cluster offers (more than the "
        "machine's: its jobs are small and mostly wait)",
    )
    spark_worker_memory: str = _setting("4g", "memory each worker of the local Spark cluster offers")
    spark_executor_memory: str = _setting("1g", "memory of each executor on a Spark cluster")
    spark_cores_per_job: int = _setting(
        2, "cores one Spark application takes on a cluster (spark.cores.max): one executor on each of two workers"
    )
    checkpoint_location: str = _setting(
        "",
        "folder or URL (s3://bucket/prefix) of the streaming jobs' checkpoints; "
        "empty = STATE_DIR/checkpoints. Shared storage on a cluster of several "
        "machines: the executors write the live windows' state there",
    )
    lineage_namespace: str = _setting("lineage_assets", "OpenLineage namespace of the project's jobs")
    lineage_segment_mb: int = _setting(64, "size at which the lineage event log starts a new segment file")
    lineage_retention_days: int = _setting(
        0,
        "days a lineage log segment is kept once every event in it is delivered; 0 = keep all "
        "(a segment with an undelivered event is never removed)",
    )
    deployment_backend: str = _setting("local", "where streaming deployments run: local (processes) or docker")
    dagster: str = _setting(
        "dev",
        "how Dagster runs: dev (`make dev`: dagster dev in the foreground) or services (the stack runs a code "
        "server, the webserver and the daemon on the project's instance, as Dagster's deployment guides do)",
    )
    run_launcher: str = _setting(
        "process",
        "where `dagster dev` runs each Dagster run: process (Dagster's default) or docker (a container of "
        "docker_image per run, dagster-docker's DockerRunLauncher)",
    )
    docker_host: str = _setting(
        "",
        "Docker engine (unix:///... or tcp://...); empty = the machine's own when one answers at "
        "DOCKER_HOST or /var/run/docker.sock, else the stack's (`make engine`)",
    )
    docker_image: str = _setting(
        "lineage-assets:latest", "image of the docker deployment backend and run launcher (infra/Dockerfile)"
    )
    restart_dead_deployments: bool = _setting(False, "the supervision sensor redeploys a failed deployment")
    spark_class_sharing: bool = _setting(
        True,
        "Spark drivers map their classes from a class-data-sharing archive "
        "that the first successful job writes (starts jobs ~6 s faster)",
    )

    def beside(self, name: str, port_offset: int) -> Settings:
        """A local stack of its own next to this one (the tests', the benchmarks', the pictures'): its
        state in ``state_dir/name`` and every port shifted by ``port_offset``."""
        ports = {
            f.name: getattr(self, f.name) + port_offset for f in dataclasses.fields(self) if f.name.endswith("_port")
        }
        return dataclasses.replace(self, state_dir=self.state_dir / name, **ports)

    # Derived addresses: an explicit override wins over the local stack's address.
    @property
    def kafka_servers(self) -> str:
        return (
            self.kafka_bootstrap
            or self._client_properties_address("bootstrap.servers")
            or ",".join(f"{self.host}:{port}" for port in self.kafka_broker_ports)
        )

    def _client_properties_address(self, key: str) -> str:
        """An address the Kafka client properties file gives (Confluent Cloud's files carry them)."""
        if not self.kafka_client_properties:
            return ""
        return read_kafka_properties(Path(self.kafka_client_properties)).get(key, "")

    @property
    def kafka_broker_ports(self) -> list[int]:
        """The local Kafka's broker listeners, node 1 first."""
        return [self.kafka_node_ports(node)[0] for node in range(1, self.kafka_brokers + 1)]

    def kafka_node_ports(self, node: int) -> tuple[int, int]:
        """Local Kafka node ``node``'s (broker, controller) listener ports."""
        return self.kafka_port + 2 * (node - 1), self.kafka_controller_port + 2 * (node - 1)

    @property
    def topic_replication(self) -> int:
        return self.kafka_replication_factor or min(self.kafka_brokers, 3)

    @property
    def tls(self) -> bool:
        """Whether the local stack runs its tls profile."""
        return self.security == TLS

    @property
    def security_dir(self) -> Path:
        """The tls profile's CA, certificates, stores, client properties and secrets (owner-only)."""
        return self.state_dir / "security"

    @property
    def kafka_properties_path(self) -> Path | None:
        """The Kafka client properties file in effect: the setting's, else the tls profile's."""
        if self.kafka_client_properties:
            return Path(self.kafka_client_properties)
        return self.security_dir / PROFILE_CLIENT_PROPERTIES if self.tls else None

    @property
    def ca_path(self) -> Path | None:
        """The CA bundle the HTTPS clients trust besides the system's: the setting's, else the tls profile's."""
        if self.ca_file:
            return Path(self.ca_file)
        return self.security_dir / PROFILE_CA if self.tls else None

    @property
    def _local_scheme(self) -> str:
        return "https" if self.tls else "http"

    def as_stack(self) -> Settings:
        """These settings as the local stack configures and probes its own services: with the profile's
        credentials (none, or the tls profile's generated ones), not those a client's settings give,
        which may be wrong (the preflight then names them) or another platform's."""
        return dataclasses.replace(
            self,
            kafka_client_properties="",
            ca_file="",
            catalog_token="",
            catalog_credential="",
            catalog_oauth2_server_uri="",
            catalog_scope="",
            marquez_api_key="",
        )

    def behind_proxy(self, port: int) -> int:
        """Where a service that the tls profile's proxy fronts on ``port`` listens itself."""
        return port + BEHIND_PROXY_OFFSET if self.tls else port

    @property
    def s3_url(self) -> str:
        return self.s3_endpoint or f"{self._local_scheme}://{self.host}:{self.s3_port}"

    @property
    def schema_registry_url(self) -> str:
        return (
            self.registry_url
            or self._client_properties_address("schema.registry.url")
            or f"{self._local_scheme}://{self.host}:{self.registry_port}/apis/ccompat/v7"
        )

    @property
    def iceberg_catalog_url(self) -> str:
        return self.catalog_url or f"{self._local_scheme}://{self.host}:{self.iceberg_rest_port}"

    @property
    def local_token_server(self) -> bool:
        """Whether the stack runs a token server: the tls profile's, whose catalog takes its tokens."""
        return self.tls and not self.catalog_url

    @property
    def local_token_server_url(self) -> str:
        return f"https://{self.host}:{self.token_server_port}/realms/{TOKEN_SERVER_REALM}"

    @property
    def catalog_token_endpoint(self) -> str:
        """Where the catalog's OAuth2 client asks for tokens: the setting's, else the stack's token
        server, else (empty) the catalog's own endpoint."""
        if self.catalog_oauth2_server_uri or not self.local_token_server:
            return self.catalog_oauth2_server_uri
        return f"{self.local_token_server_url}/protocol/openid-connect/token"

    @property
    def catalog_oauth2_scope(self) -> str:
        local = self.local_token_server and not self.catalog_oauth2_server_uri
        return self.catalog_scope or (PROFILE_CATALOG_SCOPE if local else "")

    @property
    def marquez_api_url(self) -> str:
        return self.marquez_url or f"{self._local_scheme}://{self.host}:{self.marquez_port}"

    @property
    def local_spark_cluster_url(self) -> str:
        """The master URL of the stack's own Spark cluster."""
        return f"spark://{self.host}:{self.spark_cluster_port}"

    @property
    def runs_spark_cluster(self) -> bool:
        """Whether the jobs run on the stack's own Spark cluster (which the stack then starts)."""
        return self.spark_master == self.local_spark_cluster_url

    @property
    def marquez_web_url(self) -> str:
        return f"http://{self.host}:{self.marquez_web_port}"

    @property
    def dagster_url(self) -> str:
        return f"http://{self.host}:{self.dagster_port}"

    @property
    def catalog_jdbc_url(self) -> str:
        return f"jdbc:postgresql://{self.host}:{self.postgres_port}/{self.catalog_database}"

    @property
    def marquez_jdbc_url(self) -> str:
        return f"jdbc:postgresql://{self.host}:{self.postgres_port}/{self.marquez_database}"

    @property
    def warehouse_url(self) -> str:
        return f"s3://{self.warehouse_bucket}/"

    @property
    def jars_dir(self) -> Path:
        return self.cache_dir / "jars"

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def lineage_dir(self) -> Path:
        """The durable lineage event log, its delivery cursor and the published design."""
        return self.state_dir / "lineage"

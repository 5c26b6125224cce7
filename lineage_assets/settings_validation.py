"""The settings' validation: every problem found before anything runs, one line naming its variable and value."""

from __future__ import annotations

import dataclasses
import re
import urllib.parse
from pathlib import Path

from lineage_assets.kafka_properties import KafkaPropertiesError, read_kafka_properties
from lineage_assets.settings import ENV_PREFIX, SECURITY_PROFILES, Settings, SettingsError


def problems_of(settings: Settings) -> list[str]:
    """What is wrong with ``settings``, found without the network: ranges, URL schemes, forms."""
    found = []

    def bad(name: str, why: str) -> None:
        found.append(f"{ENV_PREFIX}{name.upper()}={getattr(settings, name)!r}: {why}")

    for f in dataclasses.fields(settings):
        if f.name.endswith("_port") and not 0 < getattr(settings, f.name) < 65536:
            bad(f.name, "a TCP port is 1 to 65535")
    for name in ("s3_endpoint", "registry_url", "catalog_url", "marquez_url"):
        url = urllib.parse.urlsplit(getattr(settings, name))
        if url.geturl() and (url.scheme not in ("http", "https") or not url.hostname):
            bad(name, "an http:// or https:// URL with a host")
    for server in filter(None, settings.kafka_bootstrap.split(",")):
        host, _, port = server.strip().rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            bad("kafka_bootstrap", f"{server.strip()!r} is not HOST:PORT (servers separated by commas)")
    if not re.fullmatch(
        r"local(\[(\d+|\*)(,\d+)?\])?|spark://[^/:,]+:\d+(,[^/:,]+:\d+)*|yarn|k8s://\S+", settings.spark_master
    ):
        bad("spark_master", "a Spark master URL: local, local[N], local[*], spark://HOST:PORT, yarn or k8s://URL")
    for name in ("spark_driver_memory", "spark_worker_memory", "spark_executor_memory"):
        if not re.fullmatch(r"(?i)\d+[kmgt]?b?", getattr(settings, name)):
            bad(name, "a JVM memory size such as 512m or 2g")
    if settings.kafka_brokers not in (1, 3):
        bad("kafka_brokers", "the local Kafka has 1 or 3 brokers")
    for name in ("orders_partitions", "spark_worker_cores", "spark_cores_per_job", "lineage_segment_mb"):
        if getattr(settings, name) < 1:
            bad(name, "at least 1")
    for name in (
        "kafka_replication_factor",
        "max_records_per_batch",
        "lineage_retention_days",
        "marquez_retention_days",
        "snapshot_retention_hours",
    ):
        if getattr(settings, name) < 0:
            bad(name, "0 or more")
    if settings.snapshots_kept < 2:
        bad("snapshots_kept", "2 or more: a restarted stream looks its last batch's snapshot up among them")
    if settings.orphan_file_age_hours < 24:
        bad("orphan_file_age_hours", "24 or more: younger files may belong to a write still in flight")
    # The form only: Dagster's cron parser checks each field's values when the definitions load.
    if not re.fullmatch(r"[0-9A-Za-z*/,?-]+( [0-9A-Za-z*/,?-]+){4}", settings.upkeep_schedule.strip()):
        bad("upkeep_schedule", "a cron schedule of five fields, such as '23 * * * *'")
    if settings.security not in SECURITY_PROFILES:
        bad("security", " or ".join(SECURITY_PROFILES))
    if settings.ca_file and not Path(settings.ca_file).is_file():
        bad("ca_file", "no such file")
    if settings.kafka_client_properties:
        try:
            read_kafka_properties(Path(settings.kafka_client_properties))
        except KafkaPropertiesError as error:
            found.append(str(error))
    if settings.catalog_credential and ":" not in settings.catalog_credential:
        found.append(f"{ENV_PREFIX}CATALOG_CREDENTIAL: not CLIENT_ID:SECRET")  # the value is a secret
    token_endpoint = settings.catalog_oauth2_server_uri
    if token_endpoint and not token_endpoint.startswith(("http://", "https://")):
        bad("catalog_oauth2_server_uri", "an http:// or https:// URL")
    if settings.deployment_backend not in ("local", "docker"):
        bad("deployment_backend", "local or docker")
    if settings.dagster not in ("dev", "services"):
        bad("dagster", "dev or services")
    if settings.run_launcher not in ("process", "docker"):
        bad("run_launcher", "process or docker")
    for name in ("orders_topic", "supplier_stats_topic", "dead_letter_topic", "suppliers_topic"):
        if not re.fullmatch(r"[A-Za-z0-9._-]{1,249}", getattr(settings, name)):
            bad(name, "a Kafka topic name: letters, digits, '.', '_' and '-'")
    for name in ("archive_bucket", "warehouse_bucket"):
        if not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", getattr(settings, name)):
            bad(name, "an S3 bucket name: 3 to 63 lower-case letters, digits, '.' and '-'")
    for name in ("catalog_name", "iceberg_namespace"):
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", getattr(settings, name)):
            bad(name, "a Spark identifier: letters, digits and '_'")
    return found


def validated(settings: Settings) -> Settings:
    """``settings``, or SettingsError listing every problem (see ``problems_of``)."""
    if problems := problems_of(settings):
        raise SettingsError("\n".join(problems))
    return settings

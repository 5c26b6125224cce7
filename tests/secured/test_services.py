"""The tls profile of the local stack (``LINEAGE_ASSETS_SECURITY=tls``): Kafka
takes SASL_SSL clients only (SCRAM-SHA-512 and PLAIN users) and mutual-TLS ones on a listener of its own,
S3 answers over HTTPS, and the registry, the catalog and Marquez answer through a TLS proxy only with
their credentials (the catalog's a token its OAuth2 token server, Keycloak, grants); the credentials are
in owner-only files and on no process's command line."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import boto3
import botocore.exceptions
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from lineage_assets.connections import (
    TokenRefused,
    catalog_access_token,
    https_context,
    kafka_conf,
    librdkafka_conf,
    marquez_headers,
    registry_client_conf,
    s3_client,
)
from lineage_assets.kafka_properties import read_kafka_properties
from lineage_assets.processes import command_line
from lineage_assets.settings import Settings
from lineage_assets.settings_environment import as_environment, secret_in_effect
from lineage_assets.stack import security
from lineage_assets.stack.services.token_server import TOKEN_LIFETIME_S
from tests.conftest import wait_for
from tests.secured.conftest import profile_secrets


def _profile_conf(settings: Settings, properties: str) -> dict[str, str]:
    """confluent-kafka's configuration from one of the profile's client properties files."""
    found = read_kafka_properties(settings.security_dir / properties)
    return librdkafka_conf(found, found.get("bootstrap.servers", settings.kafka_servers))


def _errors(conf: dict[str, str], seconds: float = 15) -> list[KafkaError]:
    """The errors a producer with ``conf`` reports while it tries to reach the brokers."""
    errors: list[KafkaError] = []
    producer = Producer({**conf, "error_cb": errors.append})
    deadline = time.monotonic() + seconds
    while not errors and time.monotonic() < deadline:
        producer.poll(0.5)
    return errors


def _round_trip(settings: Settings, conf: dict[str, str]) -> None:
    """A record produced to a new topic and consumed back with ``conf``."""
    topic = f"secured-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(kafka_conf(settings))  # alive until its future is done
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
    producer = Producer(conf)
    producer.produce(topic, value=topic.encode())
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": topic, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        record = wait_for(lambda: consumer.poll(1), 60, f"the record on {topic}", poll=0)
        assert record.error() is None and record.value() == topic.encode()
    finally:
        consumer.close()


def test_kafka_refuses_a_plaintext_client(secured):
    settings = secured
    plaintext = {"bootstrap.servers": settings.kafka_servers}
    with pytest.raises(KafkaException) as refused:
        AdminClient(plaintext).list_topics(timeout=5)
    assert refused.value.args[0].code() == KafkaError._TRANSPORT
    errors = _errors(plaintext)
    assert errors and all(error.code() in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN) for error in errors)


def test_kafka_scram_and_plain_users_produce_and_consume(secured):
    settings = secured
    assert kafka_conf(settings)["sasl.mechanism"] == "SCRAM-SHA-512"
    _round_trip(settings, kafka_conf(settings))
    plain = _profile_conf(settings, security.PLAIN_PROPERTIES)
    assert plain["sasl.mechanism"] == "PLAIN"
    _round_trip(settings, plain)


def test_kafka_certificate_client_on_its_own_listener(secured):
    settings = secured
    mtls = _profile_conf(settings, security.MTLS_PROPERTIES)
    assert mtls["security.protocol"] == "SSL" and mtls["bootstrap.servers"] != settings.kafka_servers
    _round_trip(settings, mtls)
    # The same listener refuses a client without a certificate.
    anonymous = {key: value for key, value in mtls.items() if not key.startswith(("ssl.certificate", "ssl.key"))}
    with pytest.raises(KafkaException):
        AdminClient(anonymous).list_topics(timeout=5)


def test_kafka_refuses_a_wrong_scram_password(secured):
    settings = secured
    errors = _errors({**kafka_conf(settings), "sasl.password": "not-the-password"})
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in errors[0].str()


def test_s3_over_https_trusting_the_profiles_ca(secured):
    settings = secured
    assert settings.s3_url.startswith("https://")
    buckets = {bucket["Name"] for bucket in s3_client(settings).list_buckets()["Buckets"]}
    assert {settings.archive_bucket, settings.warehouse_bucket} <= buckets  # made by its after-start
    system_trust_only = boto3.client(
        "s3",
        endpoint_url=settings.s3_url,
        region_name=settings.s3_region,
        aws_access_key_id=settings.s3_access_key,
        aws_secret_access_key=settings.s3_secret_key,
    )
    with pytest.raises(botocore.exceptions.SSLError, match="CERTIFICATE_VERIFY_FAILED"):
        system_trust_only.list_buckets()


def _status(url: str, context: ssl.SSLContext, headers: dict[str, str] | None = None, body: object = None) -> int:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url,
        data=data,
        headers={**(headers or {}), "Content-Type": "application/json"},
        method="POST" if data else "GET",
    )
    try:
        with urllib.request.urlopen(request, timeout=30, context=context) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


def test_registry_requires_its_basic_auth(secured):
    settings = secured
    context = https_context(settings)
    assert _status(f"{settings.schema_registry_url}/subjects", context) == 401
    client = SchemaRegistryClient(registry_client_conf(settings))
    schema = Schema(json.dumps({"type": "record", "name": "Probe", "fields": [{"name": "id", "type": "long"}]}), "AVRO")
    client.register_schema("secured-probe-value", schema)
    assert "secured-probe-value" in client.get_subjects()
    wrong = {**registry_client_conf(settings), "basic.auth.user.info": "lineage-assets:not-the-password"}
    with pytest.raises(SchemaRegistryError) as refused:
        SchemaRegistryClient(wrong).get_subjects()
    assert refused.value.http_status_code == 401


def test_catalog_requires_a_token_its_token_server_grants_and_writes_over_https(secured):
    settings = secured
    context = https_context(settings)
    catalog = settings.iceberg_catalog_url
    assert _status(f"{catalog}/v1/config", context) == 401
    assert _status(f"{catalog}/v1/config", context, {"Authorization": "Bearer not-a-token"}) == 401
    client, _, secret = secret_in_effect(settings, "catalog_credential").partition(":")
    for wrong in (f"{client}:not-{secret}", f"not-{client}:{secret}"):
        with pytest.raises(TokenRefused, match="^401: "):
            catalog_access_token(dataclasses.replace(settings, catalog_credential=wrong))
    # A token of the realm without the scope the proxy's check needs is refused too.
    unscoped = catalog_access_token(dataclasses.replace(settings, catalog_scope="profile"))
    assert _status(f"{catalog}/v1/config", context, {"Authorization": f"Bearer {unscoped}"}) == 403
    token = {"Authorization": f"Bearer {catalog_access_token(settings)}"}
    assert _status(f"{catalog}/v1/config", context, token) == 200
    # A table's first metadata file, written by the catalog's server to S3 over HTTPS (trusting the CA).
    assert _status(f"{catalog}/v1/namespaces", context, token, {"namespace": ["secured"]}) == 200
    table = {
        "name": "probe",
        "schema": {
            "type": "struct",
            "schema-id": 0,
            "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
        },
    }
    assert _status(f"{catalog}/v1/namespaces/secured/tables", context, token, table) == 200
    listed = s3_client(settings).list_objects_v2(Bucket=settings.warehouse_bucket, Prefix="secured/probe/metadata/")
    assert [item["Key"] for item in listed.get("Contents", []) if item["Key"].endswith(".metadata.json")]


# A Spark job of its own (a session's catalog is configured once per process), writing on either side
# of a wait longer than its first token lives.
WRITE_TWICE = """
import sys, time
from lineage_assets.settings_environment import settings_from_env
from lineage_assets.spark_conf import in_process_session

settings = settings_from_env()
spark = in_process_session(settings)
table = f"{settings.catalog_name}.secured.{sys.argv[1]}"
spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {settings.catalog_name}.secured")
spark.sql(f"CREATE TABLE {table} (id bigint) USING iceberg")
spark.sql(f"INSERT INTO {table} VALUES (1)")
time.sleep(float(sys.argv[2]))
spark.sql(f"INSERT INTO {table} VALUES (2)")
print("rows", spark.table(table).count())
"""


def test_a_spark_job_writes_on_past_its_first_catalog_tokens_lifetime(secured):
    """The token server's tokens live a minute and the catalog refuses one past it, as any does after its
    lifetime; a job writing for longer (a streaming job writes for days) asks for a new one with its
    credential. Iceberg's client would ask by token exchange, which Keycloak refuses unless a client
    enables it ("Standard token exchange is not enabled"): its jobs then fail once their token expires."""
    token = catalog_access_token(secured)
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    assert claims["exp"] - claims["iat"] == TOKEN_LIFETIME_S
    table = f"outlives_{uuid.uuid4().hex[:8]}"
    job = subprocess.run(
        [sys.executable, "-c", WRITE_TWICE, table, str(TOKEN_LIFETIME_S + 15)],
        env={**os.environ, **as_environment(secured)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert job.returncode == 0, job.stderr[-3000:]
    assert job.stdout.split()[-2:] == ["rows", "2"]
    # By now the catalog refuses a token granted before the job started: its second write had another.
    config = f"{secured.iceberg_catalog_url}/v1/config"
    assert _status(config, https_context(secured), {"Authorization": f"Bearer {token}"}) == 401


def test_marquez_requires_its_api_key(secured):
    settings = secured
    context = https_context(settings)
    namespaces = f"{settings.marquez_api_url}/api/v1/namespaces"
    assert _status(namespaces, context) == 401
    event = {
        "eventType": "COMPLETE",
        "eventTime": "2026-01-01T00:00:00Z",
        "run": {"runId": str(uuid.uuid4())},
        "job": {"namespace": "secured-probe", "name": "probe"},
        "inputs": [],
        "outputs": [],
        "producer": "https://github.com/lineage-assets/tests",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/definitions/RunEvent",
    }
    assert _status(f"{settings.marquez_api_url}/api/v1/lineage", context, body=event) == 401
    assert _status(f"{settings.marquez_api_url}/api/v1/lineage", context, marquez_headers(settings), event) == 201
    assert _status(f"{namespaces}/secured-probe", context, marquez_headers(settings)) == 200


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_secrets_only_in_owner_only_files(secured):
    settings = secured
    secrets = profile_secrets(settings)
    assert _mode(settings.security_dir) == 0o700
    for path in settings.security_dir.iterdir():
        content = path.read_bytes()
        if any(secret.encode() in content for secret in secrets) or b"PRIVATE KEY" in content or path.suffix == ".p12":
            assert _mode(path) == 0o600, path
    assert _mode(settings.security_dir / security.CA) & 0o044  # the CA's certificate is for anyone
    for configuration in ("kafka/server.properties", "s3/s3proxy.properties", "proxy/nginx.conf"):
        assert _mode(settings.state_dir / configuration) == 0o600, configuration


def test_no_secret_on_a_command_line_or_in_a_log(secured_profile):
    settings, supervisor = secured_profile
    secrets = profile_secrets(settings)
    assert {status.name for status in supervisor.status() if status.running} >= {"kafka", "s3", "proxy", "token-server"}
    for entry in Path("/proc").iterdir():
        arguments = command_line(int(entry.name)) if entry.name.isdigit() else None
        assert not any(secret in argument for secret in secrets for argument in arguments or ()), arguments
    for log in settings.logs_dir.iterdir():
        text = log.read_text(errors="replace")
        assert not any(secret in text for secret in secrets), log


def test_the_profile_outlives_a_restart(secured_profile):
    settings, supervisor = secured_profile
    before = {path.name: path.read_bytes() for path in settings.security_dir.iterdir() if path.suffix != ".p12"}
    supervisor.down(["proxy", "s3", "kafka"])
    supervisor.up(["kafka", "s3", "proxy"])
    after = {path.name: path.read_bytes() for path in settings.security_dir.iterdir() if path.suffix != ".p12"}
    assert after == before
    _round_trip(settings, kafka_conf(settings))  # the SCRAM user is the one its nodes were formatted with
    assert s3_client(settings).list_buckets()["Buckets"]

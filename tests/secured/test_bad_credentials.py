"""On the tls profile, a wrong password, an untrusted certificate or a plaintext client at a TLS listener
stops `lineage-assets demo` before it does any work, in one line per service that names it and the
setting to change: no order produced, no lineage recorded. A Dagster run is refused the same way."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import certifi
import pytest

from lineage_assets.connections import kafka_conf
from lineage_assets.lineage.emitter import LineageEmitter
from lineage_assets.resources.kafka import KafkaResource
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.settings import Settings
from lineage_assets.settings_environment import as_environment
from lineage_assets.stack import security
from lineage_assets.topics import end_offsets
from tests.integration.test_bad_settings import refused_orders_run

PROPERTIES = "LINEAGE_ASSETS_KAFKA_CLIENT_PROPERTIES"


def client_properties(secured: Settings, folder: Path, name: str, change) -> str:
    """The profile's client properties with ``change`` applied to its lines, in an owner-only file."""
    lines = (secured.security_dir / security.CLIENT_PROPERTIES).read_text().splitlines()
    path = folder / f"{name}.properties"
    path.write_text("".join(f"{line}\n" for line in change(lines)))
    path.chmod(0o600)
    return str(path)


def replaced(key: str, value: str):
    return lambda lines: [f"{key}={value}" if line.startswith(f"{key}=") else line for line in lines]


def without(*prefixes: str):
    return lambda lines: [line for line in lines if not line.startswith(prefixes)]


def only(*prefixes: str):
    return lambda lines: [line for line in lines if line.startswith(prefixes)]


@pytest.fixture(scope="module")
def ready(secured) -> Settings:
    KafkaResource(environment=SettingsResource.of(secured)).ensure_topics(secured.orders_topic)
    return secured


def state(settings: Settings) -> tuple[dict[int, int], int]:
    """The orders topic's end offsets (read with the profile's own user) and the events recorded."""
    return end_offsets(kafka_conf(settings), settings.orders_topic), len(LineageEmitter(settings.lineage_dir).events())


CASES = {  # case: (the variables it sets, given the profile and a folder; the lines the demo says)
    "wrong SCRAM password": (
        lambda s, d: {PROPERTIES: client_properties(s, d, "wrong", replaced("sasl.password", "not-the-password"))},
        lambda s, d: [
            f"Kafka at {s.kafka_servers} refused the SASL user and password: sasl.* in "
            f"{PROPERTIES}='{d}/wrong.properties'"
        ],
    ),
    "Kafka's certificate untrusted": (
        lambda s, d: {PROPERTIES: client_properties(s, d, "no-ca", without("ssl.ca.location"))},
        lambda s, d: [
            f"Kafka at {s.kafka_servers}: its certificate is not one the client trusts: ssl.ca.location in "
            f"{PROPERTIES}='{d}/no-ca.properties'"
        ],
    ),
    "a plaintext client at the SASL_SSL listener": (
        lambda s, d: {PROPERTIES: client_properties(s, d, "plaintext", only("basic.auth"))},
        lambda s, d: [
            f"Kafka at {s.kafka_servers} closed the connection of a PLAINTEXT client: security.protocol in "
            f"{PROPERTIES}='{d}/plaintext.properties'"
        ],
    ),
    "wrong registry password": (
        lambda s, d: {
            PROPERTIES: client_properties(s, d, "registry", replaced("basic.auth.user.info", "lineage-assets:no"))
        },
        lambda s, d: [
            f"the schema registry at {s.schema_registry_url} refused the credentials: "
            f"basic.auth.user.info in {PROPERTIES}"
        ],
    ),
    "wrong catalog token": (
        lambda s, d: {"LINEAGE_ASSETS_CATALOG_TOKEN": "not-the-token"},
        lambda s, d: [
            f"the Iceberg REST catalog at {s.iceberg_catalog_url} refused the credentials (401): "
            "LINEAGE_ASSETS_CATALOG_TOKEN"
        ],
    ),
    "wrong catalog credential": (
        lambda s, d: {"LINEAGE_ASSETS_CATALOG_CREDENTIAL": "lineage-assets:not-the-secret"},
        lambda s, d: [
            f"the OAuth2 token endpoint at {s.catalog_token_endpoint} refused the credentials "
            "(401: unauthorized_client): LINEAGE_ASSETS_CATALOG_CREDENTIAL"
        ],
    ),
    "wrong Marquez API key": (
        lambda s, d: {"LINEAGE_ASSETS_MARQUEZ_API_KEY": "not-the-key"},
        lambda s, d: [f"Marquez at {s.marquez_api_url} refused the credentials (401): LINEAGE_ASSETS_MARQUEZ_API_KEY"],
    ),
    "the HTTPS services' certificates untrusted": (
        lambda s, d: {"LINEAGE_ASSETS_CA_FILE": certifi.where()},  # public CAs only, not the profile's
        lambda s, d: [
            f"the schema registry at {s.schema_registry_url}: its certificate is not one the client trusts: "
            "LINEAGE_ASSETS_CA_FILE",
            f"S3 at {s.s3_url}: its certificate is not one the client trusts: LINEAGE_ASSETS_CA_FILE",
            f"the OAuth2 token endpoint at {s.catalog_token_endpoint}: its certificate is not one the client "
            "trusts: LINEAGE_ASSETS_CA_FILE",
            f"Marquez at {s.marquez_api_url}: its certificate is not one the client trusts "
            "(self-signed certificate in certificate chain): LINEAGE_ASSETS_CA_FILE",
        ],
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_bad_credentials_stop_the_demo_before_any_work_naming_the_service_and_setting(ready, tmp_path, case):
    variables, said = CASES[case]
    before = state(ready)
    result = subprocess.run(
        [sys.executable, "-m", "lineage_assets.cli", "demo", "--orders", "5"],
        capture_output=True,
        text=True,
        env={**os.environ, **as_environment(ready), **variables(ready, tmp_path)},
        timeout=600,
    )
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    assert result.stderr.splitlines() == [f"lineage-assets: {line}" for line in said(ready, tmp_path)]
    assert "Traceback" not in result.stderr + result.stdout and "orders:" not in result.stdout
    assert state(ready) == before


def test_a_dagster_run_with_a_wrong_token_fails_before_its_lineage_starts(ready):
    offsets, _ = state(ready)
    error, recorded_since = refused_orders_run(ready, "LINEAGE_ASSETS_CATALOG_TOKEN", "not-it")
    assert "refused the credentials (401): LINEAGE_ASSETS_CATALOG_TOKEN" in error
    assert recorded_since == [] and state(ready)[0] == offsets

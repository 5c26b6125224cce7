"""The whole pipeline on the tls profile: `lineage-assets demo` runs every asset through SASL_SSL Kafka,
the registry's basic auth, S3 over HTTPS, the catalog with the tokens its OAuth2 token server grants the
jobs' client credentials (the proxy takes no other) and Marquez's API key, both lineage
checks clean; no secret is on any command line meanwhile, nor in a log, an event, Dagster's storage or
a file others may read. The lineage backend takes the same key and CA through openlineage-python's own
configuration."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import uuid

import pytest
import requests

from lineage_assets.connections import ca_bundle, kafka_conf
from lineage_assets.lineage.delivery import Backend, emit_data
from lineage_assets.lineage.emitter import LineageEmitter
from lineage_assets.lineage.marquez import MarquezApi
from lineage_assets.settings_environment import as_environment, secret_in_effect
from lineage_assets.topics import end_offsets
from tests.process_arguments import ArgumentSampler
from tests.secured.conftest import profile_secrets


@pytest.fixture(scope="module")
def demo(secured):
    """`lineage-assets demo` on the profile, every process's arguments sampled while it ran."""
    secrets = profile_secrets(secured)
    with ArgumentSampler(*(secret.encode() for secret in secrets)) as arguments:
        done = subprocess.run(
            [sys.executable, "-m", "lineage_assets.cli", "demo", "--orders", "200", "--seed", "4242"],
            capture_output=True,
            text=True,
            env={**os.environ, **as_environment(secured)},
            timeout=900,
        )
    return done, arguments, secrets


def test_the_demo_runs_every_asset_secured_and_both_lineage_checks_are_clean(secured, demo):
    done, _, _ = demo
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert "lineage_matches_catalog of lakehouse/supplier_stats passed" in done.stdout
    assert f"lineage check: the lineage in {secured.lineage_dir}/segments" in done.stdout
    checks = [line for line in done.stdout.splitlines() if line.startswith("lineage check:")]
    assert len(checks) == 2 and all(line.endswith("matches the asset graph") for line in checks), checks
    produced = sum(end_offsets(kafka_conf(secured), secured.orders_topic).values())
    assert produced == 200  # through the SCRAM user, as the demo wrote them


def test_no_secret_on_a_command_line_while_the_demo_ran(demo):
    _, arguments, _ = demo
    assert arguments.holding == {}
    # The jobs were seen, given the client properties by path.
    assert arguments.saw(b"--kafka-properties", b"--properties-file")


def test_secrets_only_in_owner_only_configuration_files(secured, demo):
    _, _, secrets = demo
    holding = {}
    for path in secured.state_dir.rglob("*"):
        try:
            if path.is_file() and not path.is_symlink():
                content = path.read_bytes()
                if any(secret.encode() in content for secret in secrets):
                    holding[path.relative_to(secured.state_dir)] = stat.S_IMODE(path.stat().st_mode)
        except OSError:
            continue  # gone while the folder was read
    assert {mode for mode in holding.values()} == {0o600}
    kinds = {path.parts[0] for path in holding}
    # The servers' configurations, the token server's database (its realm file names the client's secret
    # by a variable), the clients' files, the backend's transport; never a log, a segment of the event
    # log, Dagster's storage or a job's report.
    assert kinds <= {"security", "kafka", "s3", "proxy", "token-server", "lineage", "deployments", "runs"}, holding
    assert not [path for path in holding if path.parts[0] == "token-server" and path.parts[1:3] != ("data", "h2")]
    assert not [path for path in holding if path.parts[0] == "lineage" and path.name != "backend.json"], holding
    assert not [path for path in holding if path.suffix in (".log", ".json", ".jsonl") and path.name != "backend.json"]


def test_no_secret_in_the_events_in_the_log_or_in_marquez(secured, demo):
    _, _, secrets = demo
    logged = [json.dumps(event) for event in LineageEmitter(secured.lineage_dir).events()]
    stored = [json.dumps(event) for event in MarquezApi.of(secured).events(limit=1000)]
    assert len(logged) >= 20 and len(stored) >= 20
    assert not [secret[:4] for secret in secrets if any(secret in text for text in logged + stored)]


def test_openlineage_s_own_configuration_carries_the_api_key_and_the_ca(secured, monkeypatch):
    standard = {
        "OPENLINEAGE__TRANSPORT__TYPE": "http",
        "OPENLINEAGE__TRANSPORT__URL": secured.marquez_api_url,
        "OPENLINEAGE__TRANSPORT__AUTH__TYPE": "api_key",
        "OPENLINEAGE__TRANSPORT__AUTH__APIKEY": secret_in_effect(secured, "marquez_api_key"),
    }
    for name, value in standard.items():
        monkeypatch.setenv(name, value)
    job = f"standard-configuration-{uuid.uuid4().hex[:8]}"
    event = {
        "eventType": "COMPLETE",
        "eventTime": "2026-11-29T00:00:00Z",
        "run": {"runId": str(uuid.uuid4())},
        "job": {"namespace": "secured-standard", "name": job},
        "inputs": [],
        "outputs": [],
        "producer": "https://github.com/lineage-assets/tests",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/definitions/RunEvent",
    }
    transport = Backend().transport()  # as the sender makes it, from the standard sources
    assert transport is not None and transport.kind == "http"
    with pytest.raises(requests.exceptions.SSLError):  # requests trusts certifi's CAs only, by default
        emit_data(transport, event)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(ca_bundle(secured)))  # requests' own variable
    emit_data(transport, event)
    jobs = MarquezApi.of(secured).get("namespaces/secured-standard/jobs")["jobs"]
    assert job in {each["name"] for each in jobs}

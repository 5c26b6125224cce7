"""``infra/compose.yaml`` says what the stack's services say: ``lineage-assets stack compose`` writes it
from them, and a service changed since without the file rewritten is caught here."""

from __future__ import annotations

import dataclasses
import re

from lineage_assets.settings import ENV_PREFIX, PROJECT_ROOT, SECRETS_FILE_VARIABLE, Settings
from lineage_assets.stack.containers import COMPOSE_FILE, _outermost, compose_file, compose_text, stack_services


def test_the_committed_compose_file_is_the_one_written_from_the_services():
    stale = "infra/compose.yaml is stale: run `lineage-assets stack compose` and commit it"
    assert COMPOSE_FILE.read_text() == compose_text(), stale


def test_each_server_runs_from_a_jar_folder_infra_pom_resolves():
    pom = (PROJECT_ROOT / "infra" / "pom.xml").read_text()
    resolved = set(re.findall(r"<outputDirectory>\$\{jars\.dir\}/([\w-]+)</outputDirectory>", pom))
    running = {service.name: service.jars for service in stack_services() if service.jars}
    assert set(running) == {"kafka", "s3", "iceberg-rest", "registry", "marquez"}
    assert set(running.values()) <= resolved


def test_the_image_context_adds_a_nested_module_folder_once_with_the_folder_holding_it():
    folders = {"node_modules/a", "node_modules/a/node_modules/b", "node_modules/ab", "node_modules/c/node_modules/d"}
    assert _outermost(folders) == ["node_modules/a", "node_modules/ab", "node_modules/c/node_modules/d"]


def test_a_container_gets_the_secret_settings_from_the_hosts_secrets_file_never_its_environment():
    # `docker inspect` shows a container's environment to whoever may use the engine.
    composed = compose_file()
    secret = {ENV_PREFIX + field.name.upper() for field in dataclasses.fields(Settings) if field.metadata["secret"]}
    for name, service in composed["services"].items():
        passed = {variable.split("=", 1)[0] for variable in service["environment"]}
        assert not passed & secret, name
        assert f"{SECRETS_FILE_VARIABLE}=/run/secrets/lineage_assets" in service["environment"], name
        assert service["secrets"] == ["lineage_assets"], name
    # The host's file, or none (the defaults): a secret setting in the host's environment is not read.
    assert composed["secrets"] == {"lineage_assets": {"file": "${LINEAGE_ASSETS_SECRETS_FILE:-/dev/null}"}}

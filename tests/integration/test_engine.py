"""The Docker engine the stack provides (``make engine``, ``stack up docker``): the project's image runs
on the host network and reaches the stack at the settings' host, the engine leaves the machine's
network as it was, and two stacks on one machine share the one engine."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from lineage_assets.stack.services.engine import BASE_IMAGE, engine_client, engine_url
from lineage_assets.stack.supervisor import Supervisor
from tests.conftest import isolated_settings


def test_a_container_of_the_project_image_reaches_the_stack_at_the_settings_host(engine, settings):
    reach = (
        "import json, sys, urllib.request; from lineage_assets.settings import Settings; "
        "s = Settings.from_env(); "
        "print(json.load(urllib.request.urlopen(s.marquez_api_url + '/api/v1/namespaces'))['namespaces'] != None, "
        "sys.version_info[:2], s.kafka_port)"
    )
    output = engine.containers.run(
        settings.docker_image,
        ["python", "-c", reach],
        environment=settings.as_environment(),
        network_mode="host",
        remove=True,
    )
    assert output.decode().split() == ["True", "(3,", "11)", str(settings.kafka_port)]
    assert engine.images.get(BASE_IMAGE).id  # the image's base, pulled or built from Debian's mirror


def test_the_stacks_engine_adds_no_bridge_and_no_firewall_rule(engine, settings):
    if engine_url(settings) != f"unix://{settings.cache_dir / 'docker' / 'docker.sock'}":
        pytest.skip("the machine's own engine keeps its own network configuration")
    assert {network.name for network in engine.networks.list()} == {"host", "none"}
    assert not Path("/sys/class/net/docker0").exists()
    rules = subprocess.run(["iptables", "-S"], capture_output=True, text=True, check=True).stdout
    assert "DOCKER" not in rules


def test_a_second_stack_uses_the_running_engine_and_leaves_it_running(engine, settings, tmp_path):
    other = isolated_settings("engine-probe", offset=13100, state_dir=tmp_path / "state", cache_dir=settings.cache_dir)
    supervisor = Supervisor(other)
    (status,) = supervisor.up(["docker"])
    assert status.healthy and status.pid is None  # not started by this stack
    assert supervisor.down(["docker"]) == []
    assert engine_client(settings).ping()

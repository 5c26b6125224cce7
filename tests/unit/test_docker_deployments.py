"""The docker deployment backend: the container it asks the engine for (a real deployment on the
stack's engine is in tests/docker/test_engine.py)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from lineage_assets.settings import Settings
from lineage_assets.settings_environment import settings_from_env
from lineage_assets.streaming.deployments import DeploymentError, DockerDeployments, deployments_for


def docker_backend(tmp_path, **overrides) -> DockerDeployments:
    settings = Settings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache", **overrides)
    return DockerDeployments(settings, running_interval=7, container_kwargs={"mem_limit": "4g"}, client=object())


def test_container_runs_the_runner_on_the_shared_folders_and_network(tmp_path):
    backend = docker_backend(tmp_path, kafka_port=29999)
    spec = backend.container_spec("lakehouse/orders")
    folder = tmp_path / "state" / "deployments" / "iceberg-ingestion"
    assert spec["image"] == "lineage-assets:latest"
    assert spec["name"] == "lineage-assets-iceberg-ingestion"
    assert spec["command"] == ["python", "-m", "lineage_assets.streaming.runner", str(folder)]
    assert spec["volumes"] == {
        str(tmp_path / "state"): {"bind": str(tmp_path / "state"), "mode": "rw"},
        str(tmp_path / "cache"): {"bind": str(tmp_path / "cache"), "mode": "ro"},
        # The drivers' class archives: a container's classpath is its own, so it writes its own archive.
        str(tmp_path / "cache" / "class-sharing"): {"bind": str(tmp_path / "cache" / "class-sharing"), "mode": "rw"},
    }
    assert spec["network_mode"] == "host" and spec["detach"] is True and spec["mem_limit"] == "4g"
    assert spec["environment"]["LINEAGE_ASSETS_KAFKA_PORT"] == "29999"
    assert spec["labels"] == {"lineage-assets.deployment": "iceberg-ingestion"}


def test_a_containers_secrets_are_in_an_owner_only_file_not_its_environment(tmp_path):
    backend = docker_backend(tmp_path, s3_secret_key="only-in-the-file")
    environment = backend.container_spec("lakehouse/orders")["environment"]
    assert "only-in-the-file" not in str(environment)  # `docker inspect` shows a container's environment
    secrets = Path(environment["LINEAGE_ASSETS_SECRETS_FILE"])
    assert secrets.parent == tmp_path / "state" and stat.S_IMODE(secrets.stat().st_mode) == 0o600
    # What the runner in the container reads: the settings, its secrets from the file.
    assert settings_from_env(environment).s3_secret_key == "only-in-the-file"


def test_bad_docker_configuration_is_named(tmp_path):
    with pytest.raises(Exception, match="not correctly formatted"):
        docker_backend(tmp_path, docker_image="Not A Valid/Image::name")
    settings = Settings(state_dir=tmp_path)
    with pytest.raises(Exception, match="'environment' cannot be used"):
        DockerDeployments(settings, container_kwargs={"environment": {}})
    with pytest.raises(DeploymentError, match="LINEAGE_ASSETS_DEPLOYMENT_BACKEND='kubernetes'"):
        deployments_for(Settings(deployment_backend="kubernetes"))

"""Which local services `stack up` starts when settings point at services run elsewhere, and which port
settings it refuses before starting any."""

from __future__ import annotations

import dataclasses

import pytest

from lineage_assets.settings_environment import settings_from_env
from lineage_assets.stack.services.base import StackError
from lineage_assets.stack.supervisor import Supervisor, ephemeral_ports


def test_services_replaced_by_settings_are_not_started_and_say_which_setting(tmp_path):
    settings = dataclasses.replace(
        settings_from_env(),
        state_dir=tmp_path,
        kafka_bootstrap="kafka.example:9092",
        s3_endpoint="https://s3.example",
        registry_url="https://registry.example/apis/ccompat/v7",
        catalog_url="https://catalog.example",
        marquez_url="https://marquez.example",
    )
    said: list[str] = []
    # All but marquez-web: the UI always runs locally, against the Marquez API it is pointed at.
    assert (
        Supervisor(settings, progress=said.append).up(
            ["postgres", "kafka", "s3", "iceberg-rest", "registry", "marquez"]
        )
        == []
    )
    assert said == [
        "postgres     not started: LINEAGE_ASSETS_CATALOG_URL, LINEAGE_ASSETS_MARQUEZ_URL points elsewhere",
        "kafka        not started: LINEAGE_ASSETS_KAFKA_BOOTSTRAP points elsewhere",
        "s3           not started: LINEAGE_ASSETS_S3_ENDPOINT points elsewhere",
        "iceberg-rest not started: LINEAGE_ASSETS_CATALOG_URL points elsewhere",
        "registry     not started: LINEAGE_ASSETS_REGISTRY_URL points elsewhere",
        "marquez      not started: LINEAGE_ASSETS_MARQUEZ_URL points elsewhere",
    ]
    assert not any(tmp_path.iterdir()), "nothing prepared for services that are not started"


def test_postgres_runs_while_the_catalog_or_marquez_is_local(tmp_path):
    from lineage_assets.stack.services.storage import POSTGRES

    settings = dataclasses.replace(settings_from_env(), state_dir=tmp_path, catalog_url="https://catalog.example")
    assert POSTGRES.replaced(settings) == []
    assert POSTGRES.replaced(dataclasses.replace(settings, marquez_url="https://marquez.example")) == [
        "catalog_url",
        "marquez_url",
    ]


def test_the_spark_cluster_runs_only_when_the_jobs_are_pointed_at_it(tmp_path):
    local = dataclasses.replace(settings_from_env(), state_dir=tmp_path)
    cluster = dataclasses.replace(local, spark_master=local.local_spark_cluster_url)
    spark_services = {"spark-master", "spark-worker-1", "spark-worker-2"}
    assert not spark_services & {service.name for service in Supervisor(local).selected(None)}
    assert spark_services <= {service.name for service in Supervisor(cluster).selected(None)}
    # Another cluster is the settings' business, not the stack's.
    elsewhere = dataclasses.replace(local, spark_master="spark://spark.example:7077")
    assert not spark_services & {service.name for service in Supervisor(elsewhere).selected(None)}
    # `stack down` stops what it started, whatever the settings now say.
    assert spark_services <= {service.name for service in Supervisor(local).selected(None, only_wanted=False)}


def test_a_server_port_among_the_ephemeral_ones_is_refused_naming_its_setting(tmp_path):
    """Such a port is free when checked, then now and again taken by an outgoing connection before
    the server binds it (a CI run lost its S3 server so): refused before anything starts."""
    ephemeral = ephemeral_ports()
    if ephemeral is None:
        pytest.skip("this machine does not tell its ephemeral port range")
    settings = dataclasses.replace(settings_from_env(), state_dir=tmp_path, s3_port=ephemeral.start + 1000)
    with pytest.raises(
        StackError,
        match=rf"s3: port {ephemeral.start + 1000} \(LINEAGE_ASSETS_S3_PORT\) lies in "
        rf"this machine's ephemeral port range {ephemeral.start}-{ephemeral.stop - 1}",
    ):
        Supervisor(settings, progress=lambda line: None).up(["s3"])
    assert not (tmp_path / "run").exists(), "nothing started"


def test_ephemeral_port_range_is_read_from_the_kernel_setting(tmp_path):
    source = tmp_path / "ip_local_port_range"
    source.write_text("32768\t60999\n")
    assert ephemeral_ports(source) == range(32768, 61000)
    assert ephemeral_ports(tmp_path / "absent") is None

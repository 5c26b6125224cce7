"""The Docker engine the stack provides (``make engine``, ``stack up docker``): the project's image runs
on the host network and reaches the stack at the settings' host, the engine leaves the machine's
network as it was, two stacks on one machine share the one engine, and a streaming deployment runs
as a container of the image with the same lifecycle lineage as a process: stopped (ABORT), drained
(COMPLETE), its container killed (FAIL at the supervisor's next tick, its redeploy resuming from the
checkpoint), its job failing (FAIL with the error, and the container exits with the job's code)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import subprocess
from pathlib import Path

import pytest

from lineage_assets.datasets import ARCHIVE, LAKEHOUSE_ORDERS, iceberg_table_name
from lineage_assets.generator import GeneratorConfig, generate_orders, produce_orders
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.settings import PROJECT_ROOT
from lineage_assets.settings_environment import as_environment
from lineage_assets.stack.services.engine import (
    BASE_IMAGE,
    container_environment,
    container_options,
    engine_client,
    engine_url,
)
from lineage_assets.stack.supervisor import Supervisor
from lineage_assets.streaming.deployments import DockerDeployments, deployments_for
from lineage_assets.testing import isolated_settings, pipeline_of_its_own
from tests.conftest import wait_for
from tests.integration.test_deployments import (
    evaluate_supervisor,
    marquez_events,
    marquez_state,
    orders_topic_ready,
    processes_of,
    rows_and_orders,
    run_events,
)
from tests.openlineage_schemas import validate_event


def test_a_container_of_the_project_image_reaches_the_stack_at_the_settings_host(engine, settings):
    reach = (
        "import hashlib, json, sys, urllib.request; from lineage_assets.settings_environment import settings_from_env; "
        "s = settings_from_env(); "
        "print(json.load(urllib.request.urlopen(s.marquez_api_url + '/api/v1/namespaces'))['namespaces'] != None, "
        "sys.version_info[:2], s.kafka_port, hashlib.sha256(s.s3_secret_key.encode()).hexdigest())"
    )
    output = engine.containers.run(
        settings.docker_image,
        ["python", "-c", reach],
        **container_options(settings),
        environment=container_environment(settings),
        remove=True,
    )
    # The secret reached the container through its file (the digest shows it without printing it).
    secret_digest = hashlib.sha256(settings.s3_secret_key.encode()).hexdigest()
    assert output.decode().split() == ["True", "(3,", "11)", str(settings.kafka_port), secret_digest]
    assert engine.images.get(BASE_IMAGE).id  # the image's base, pulled or built from Debian's mirror


def test_the_stacks_engine_adds_no_bridge_and_no_firewall_rule(engine, settings):
    if engine_url(settings) != f"unix://{settings.cache_dir / 'docker' / 'docker.sock'}":
        pytest.skip("the machine's own engine keeps its own network configuration")
    assert {network.name for network in engine.networks.list()} == {"host", "none"}
    assert not Path("/sys/class/net/docker0").exists()
    rules = subprocess.run(["iptables", "-S"], capture_output=True, text=True, check=True).stdout
    assert "DOCKER" not in rules
    # No namespace mounted inside the checkout: dockerd leaves its network namespace mounted after it
    # stops, and such a mount would keep the checkout from being deleted.
    mounts = [line.split()[1:3] for line in Path("/proc/self/mounts").read_text().splitlines()]
    assert not [at for at, kind in mounts if kind == "nsfs" and at.startswith(str(PROJECT_ROOT))]


def test_a_second_stack_uses_the_running_engine_and_leaves_it_running(engine, settings, tmp_path):
    other = isolated_settings("engine-probe", offset=13100, state_dir=tmp_path / "state", cache_dir=settings.cache_dir)
    supervisor = Supervisor(other)
    (status,) = supervisor.up(["docker"])
    assert status.healthy and status.pid is None  # not started by this stack
    assert supervisor.down(["docker"]) == []
    assert engine_client(settings).ping()


def test_an_archive_deployed_as_a_container_reports_its_files_and_ends_with_abort_when_stopped(engine, settings):
    own = dataclasses.replace(pipeline_of_its_own(settings, "in-docker"), deployment_backend="docker")
    orders_topic_ready(own)
    deployments = deployments_for(own, running_interval=3, trigger_seconds=2)
    assert isinstance(deployments, DockerDeployments)
    try:
        assert deployments.deploy(ARCHIVE.key) == "started"
        run_id = deployments.status(ARCHIVE.key).run_id
        container = engine.containers.get(deployments.container_name(deployments.folder(ARCHIVE.key)))
        assert container.status == "running" and container.attrs["HostConfig"]["NetworkMode"] == "host"
        # What `docker inspect` shows holds no secret; the archive's writes below need the S3 keys.
        assert not [variable for variable in container.attrs["Config"]["Env"] if own.s3_secret_key in variable]
        start = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=60)
        orders = list(generate_orders(GeneratorConfig(count=40, seed=78, start=start, late_fraction=0, bad_fraction=0)))
        produce_orders(orders, own)

        def files_reported() -> dict | None:
            running = [e for e in run_events(own, run_id) if e["eventType"] == "RUNNING"]
            return next((e for e in running if e["outputs"][0].get("outputFacets", {}).get("filesWritten")), None)

        wait_for(files_reported, 180, "a RUNNING event from the container naming the files it wrote")
    finally:
        stopped = deployments.stop(ARCHIVE.key)
    assert stopped == "stopped"
    kinds = [e["eventType"] for e in run_events(own, run_id)]
    assert kinds[0] == "START" and kinds[-1] == "ABORT" and kinds.count("ABORT") == 1 and "RUNNING" in kinds
    assert all(validate_event(e) == [] for e in run_events(own, run_id))
    assert marquez_state(own, run_id) == "ABORTED"
    container.reload()
    assert container.status == "exited"


def in_docker(settings, name: str) -> tuple:
    """A pipeline of its own whose deployments are containers; its settings resource and deployments."""
    own = dataclasses.replace(pipeline_of_its_own(settings, name), deployment_backend="docker")
    return own, orders_topic_ready(own), deployments_for(own, running_interval=3, trigger_seconds=2)


def test_a_killed_container_ends_with_one_fail_at_the_next_tick_and_its_redeploy_resumes_without_duplicates(
    engine, settings, spark
):
    import dagster as dg

    own, environment, deployments = in_docker(settings, "docker-killed")
    table = iceberg_table_name(own, "orders")
    orders = list(
        generate_orders(
            GeneratorConfig(count=40, seed=4141, start=dt.datetime(2026, 11, 27, 9, tzinfo=dt.UTC), bad_fraction=0)
        )
    )
    ids = [o.key for o in orders]
    folder = deployments.folder(LAKEHOUSE_ORDERS.key)
    assert deployments.deploy(LAKEHOUSE_ORDERS.key) == "started"
    killed = deployments.status(LAKEHOUSE_ORDERS.key)
    container = engine.containers.get(deployments.container_name(folder))
    try:
        produce_orders(orders[:20], own)
        wait_for(lambda: rows_and_orders(spark, table, ids)[1] >= 20, 240, "the first orders in Iceberg")
        assert processes_of(folder), "the container's runner and Spark job are processes of this machine"

        container.kill(signal="SIGKILL")  # docker kill -s KILL: nothing inside gets to report
        wait_for(lambda: not deployments.status(LAKEHOUSE_ORDERS.key).running, 30, "the container to be gone")
        assert deployments.status(LAKEHOUSE_ORDERS.key).state == "dead"
        assert processes_of(folder) == [], "no process of the killed container outlives it"
        with dg.instance_for_test() as instance:
            restarting = SettingsResource(
                overrides={**as_environment(own), "LINEAGE_ASSETS_RESTART_DEAD_DEPLOYMENTS": "on"}
            )
            evaluate_supervisor(restarting, instance)  # one tick: FAIL for the dead run, then the redeploy
            (failed,) = [e for e in run_events(own, killed.run_id) if e["eventType"] == "FAIL"]
            error = failed["run"]["facets"]["errorMessage"]
            assert "exited with code 137 (killed by SIGKILL)" in error["message"]
            assert deployments.container_name(folder) in error["message"] and error["stackTrace"]
            assert marquez_state(own, killed.run_id) == "FAILED"
            assert [e["eventType"] for e in marquez_events(own, killed.run_id)][-1] == "FAIL"
            restarted = deployments.status(LAKEHOUSE_ORDERS.key)
            assert restarted.running and restarted.run_id != killed.run_id
            evaluate_supervisor(environment, instance)  # a second tick ends nothing more
        ends = [e for e in run_events(own, killed.run_id) if e["eventType"] in ("FAIL", "ABORT", "COMPLETE")]
        assert len(ends) == 1

        produce_orders(orders[20:], own)
        wait_for(lambda: rows_and_orders(spark, table, ids)[1] == len(ids), 240, "the remaining orders in Iceberg")
        assert deployments.stop(LAKEHOUSE_ORDERS.key, drain=True) == "stopped"
    finally:
        deployments.stop(LAKEHOUSE_ORDERS.key)
    assert rows_and_orders(spark, table, ids) == (len(ids), len(ids)), "every order once, none twice"
    drained = run_events(own, restarted.run_id)
    assert [e["eventType"] for e in drained][0] == "START" and drained[-1]["eventType"] == "COMPLETE"
    assert all(validate_event(e) == [] for e in run_events(own, killed.run_id) + drained)
    assert marquez_state(own, restarted.run_id) == "COMPLETED"
    container = engine.containers.get(deployments.container_name(folder))
    assert container.attrs["State"]["ExitCode"] == 0


def test_a_container_whose_job_fails_ends_with_fail_and_exits_with_the_jobs_code(engine, settings):
    own, _, _ = in_docker(settings, "docker-broken")
    deployments = deployments_for(dataclasses.replace(own, catalog_url="http://127.0.0.1:9"), running_interval=3)
    folder = deployments.folder(LAKEHOUSE_ORDERS.key)
    assert deployments.deploy(LAKEHOUSE_ORDERS.key) == "started"
    run_id = deployments.status(LAKEHOUSE_ORDERS.key).run_id
    wait_for(lambda: not deployments.status(LAKEHOUSE_ORDERS.key).running, 240, "the broken deployment to die")
    ended = deployments.status(LAKEHOUSE_ORDERS.key).ended
    assert ended["state"] == "FAIL" and ended["by"] == "its runner"
    container = engine.containers.get(deployments.container_name(folder))
    assert container.attrs["State"]["ExitCode"] == ended["exit_code"] != 0
    events = run_events(own, run_id)
    assert [e["eventType"] for e in events][0] == "START" and events[-1]["eventType"] == "FAIL"
    error = events[-1]["run"]["facets"]["errorMessage"]
    assert f"exited with code {ended['exit_code']}" in error["message"] and "127.0.0.1:9" in error["message"]
    assert error["stackTrace"]  # the job's last lines of output
    assert marquez_state(own, run_id) == "FAILED"

"""The local stack: each real server does its job, and the supervisor is idempotent and clear."""

from __future__ import annotations

import datetime
import ipaddress
import json
import socket
import urllib.request
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from lineage_assets.connections import s3_client
from lineage_assets.stack.services.base import StackError
from lineage_assets.stack.supervisor import Supervisor
from lineage_assets.testing import isolated_settings
from tests.conftest import another_process_serving


def _processes_using(state_dir: Path) -> list[int]:
    """Service processes of a stack: running inside its state folder (each service runs in its own
    data folder), not counting their own children (PostgreSQL's workers)."""
    parents = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cwd = (proc / "cwd").resolve()
                parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError):
                continue
            if cwd.is_relative_to(state_dir):
                parents[int(proc.name)] = parent
    return [pid for pid, parent in parents.items() if parent not in parents]


def test_kafka_topic_keyed_record_round_trip(stack, settings):
    topic = f"probe-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": settings.kafka_servers})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(timeout=30)

    producer = Producer({"bootstrap.servers": settings.kafka_servers})
    producer.produce(topic, key=b"order-1", value=b'{"price": 12.5}')
    assert producer.flush(10) == 0

    consumer = Consumer(
        {"bootstrap.servers": settings.kafka_servers, "group.id": topic, "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    try:
        message = None
        for _ in range(30):
            message = consumer.poll(1.0)
            if message is not None and not message.error():
                break
        assert message is not None and message.error() is None
        assert (message.key(), message.value()) == (b"order-1", b'{"price": 12.5}')
    finally:
        consumer.close()


def test_s3_buckets_put_list_get(stack, settings):
    client = s3_client(settings)
    buckets = {bucket["Name"] for bucket in client.list_buckets()["Buckets"]}
    assert {settings.archive_bucket, settings.warehouse_bucket} <= buckets

    key = f"probe/{uuid.uuid4().hex}.json"
    client.put_object(Bucket=settings.archive_bucket, Key=key, Body=b'{"ok": true}')
    listed = [
        item["Key"] for item in client.list_objects_v2(Bucket=settings.archive_bucket, Prefix="probe/")["Contents"]
    ]
    assert key in listed
    assert client.get_object(Bucket=settings.archive_bucket, Key=key)["Body"].read() == b'{"ok": true}'


def test_registry_registers_and_returns_an_avro_schema(stack, settings):
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    from lineage_assets.datasets import orders_avro_schema_json

    client = SchemaRegistryClient({"url": settings.schema_registry_url})
    schema_id = client.register_schema("orders-value", Schema(orders_avro_schema_json(), "AVRO"))
    fetched = client.get_schema(schema_id)
    assert json.loads(fetched.schema_str) == json.loads(orders_avro_schema_json())
    assert client.get_latest_version("orders-value").schema_id == schema_id


def test_iceberg_table_in_lakehouse_catalog_writes_to_warehouse(stack, spark, settings):
    table = f"{settings.catalog_name}.`{settings.iceberg_namespace}`.probe_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {settings.catalog_name}.`{settings.iceberg_namespace}`")
    spark.sql(f"CREATE TABLE {table} (id BIGINT, name STRING) USING iceberg")
    spark.sql(f"INSERT INTO {table} VALUES (1, 'a'), (2, 'b')")

    assert sorted(tuple(row) for row in spark.table(table).collect()) == [(1, "a"), (2, "b")]
    metadata_files = [row.file for row in spark.sql(f"SELECT file FROM {table}.metadata_log_entries").collect()]
    assert metadata_files and all(f.startswith(f"s3://{settings.warehouse_bucket}/") for f in metadata_files)

    # The files are really in the bucket, seen through the S3 API rather than through Spark.
    keys = [
        item["Key"]
        for item in s3_client(settings).list_objects_v2(
            Bucket=settings.warehouse_bucket, Prefix=f"{settings.iceberg_namespace}/"
        )["Contents"]
    ]
    assert any(key.endswith(".metadata.json") for key in keys)
    assert any(key.endswith(".parquet") for key in keys)


def test_up_twice_keeps_one_process_per_service_and_one_stops_alone(stack_of_its_own):
    # A stack of its own: stopping one of the test stack's servers would fail whatever else uses it meanwhile.
    own = stack_of_its_own("up-twice-probe", offset=11000)
    servers = ["postgres", "s3"]
    own.up(servers)
    before = sorted(_processes_using(own.settings.state_dir))
    assert len(before) == len([status for status in own.status(list(own.services)) if status.running]) == 2
    again = Supervisor(own.settings).up(servers)
    assert all(status.healthy for status in again)
    assert sorted(_processes_using(own.settings.state_dir)) == before

    # Stopping one service stops exactly its process, then it comes back.
    s3_pid = next(status.pid for status in own.status(["s3"]))
    assert own.down(["s3"]) == ["s3"]
    assert sorted(_processes_using(own.settings.state_dir)) == sorted(set(before) - {s3_pid})
    assert own.up(["s3"])[0].healthy


def test_down_stops_every_service_it_started(stack_of_its_own):
    supervisor = stack_of_its_own("down-probe", offset=11000)
    settings = supervisor.settings
    supervisor.up(["s3"])
    assert _processes_using(settings.state_dir)
    assert supervisor.down() == ["s3"]
    assert _processes_using(settings.state_dir) == []
    assert not [status.name for status in supervisor.status(list(supervisor.services)) if status.running]


def _bind_below_ephemeral(probe: socket.socket, first: int) -> int:
    """Bind ``probe`` to the first free port from ``first`` on: a port the kernel would hand out
    (port 0) lies in the ephemeral range, which the stack refuses before it looks for a squatter."""
    for port in range(first, first + 100):
        try:
            probe.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
    raise RuntimeError(f"no free port in {first}-{first + 99}")


def test_port_in_use_is_a_clear_error_naming_the_service(stack_of_its_own):
    with socket.socket() as squatter:
        port = _bind_below_ephemeral(squatter, isolated_settings("port-probe", offset=12000).s3_port)
        squatter.listen()
        with pytest.raises(StackError) as error:
            stack_of_its_own("port-probe", offset=12000, s3_port=port).up(["s3"])
    message = str(error.value)
    assert message.startswith("s3:") and f"port {port}" in message and "s3.log" in message


def test_marquez_is_not_taken_as_running_elsewhere_on_the_answer_of_whoever_holds_its_admin_port(
    stack_of_its_own, tmp_path
):
    """Another process answers Marquez's health check on its admin port: without Marquez's API on its
    own port that is not a Marquez run elsewhere, and `stack up` says the port is taken."""
    (tmp_path / "healthcheck").write_text("ok")
    with socket.socket() as probe:
        port = _bind_below_ephemeral(probe, isolated_settings("marquez-squat", offset=12200).marquez_admin_port)
    with another_process_serving(port, tmp_path, answers="/healthcheck"):
        supervisor = stack_of_its_own("marquez-squat", offset=12200, marquez_admin_port=port)
        with pytest.raises(StackError) as error:
            supervisor.up(["marquez"])  # PostgreSQL first, then Marquez's ports are looked at
        assert str(error.value).startswith(f"marquez: port {port} on 127.0.0.1 is already in use by another process")
        assert [(s.name, s.running, s.healthy) for s in supervisor.status(["marquez"])] == [("marquez", False, False)]


def test_a_healthy_service_run_elsewhere_is_used_and_left_alone(stack, settings, tmp_path):
    # The test stack's s3proxy plays a server started outside this stack (e.g. by infra/compose.yaml).
    outsider = isolated_settings("external-probe", offset=13000, state_dir=tmp_path / "state", s3_port=settings.s3_port)
    supervisor = Supervisor(outsider)
    (status,) = supervisor.up(["s3"])
    assert status.healthy and _processes_using(outsider.state_dir) == []
    assert supervisor.down(["s3"]) == []
    assert stack.status(["s3"])[0].healthy


def _http_json(url: str, body: dict | None = None):
    request = urllib.request.Request(
        url, data=None if body is None else json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status, json.loads(response.read() or b"null")


def _listening_addresses(port: int) -> set[str]:
    """Addresses that sockets listening on ``port`` are bound to, IPv4 and IPv6 (IPv4-mapped ones as IPv4)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            hex_address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                # The kernel prints each 32-bit word in host (little-endian) order.
                raw = bytes.fromhex(hex_address)
                address = ipaddress.ip_address(b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4)))
                found.add(str(getattr(address, "ipv4_mapped", None) or address))
    return found


def test_marquez_stores_an_openlineage_event_and_its_ui_serves_it(stack, settings):
    assert all(status.healthy for status in stack.status(["marquez", "marquez-web"]))
    job = f"probe_{uuid.uuid4().hex[:8]}"
    event = {
        "eventType": "COMPLETE",
        "eventTime": datetime.datetime.now(datetime.UTC).isoformat(),
        "run": {"runId": str(uuid.uuid4())},
        "job": {"namespace": "stack_probe", "name": job},
        "inputs": [],
        "outputs": [{"namespace": "stack_probe", "name": f"{job}_out"}],
        "producer": "https://example.com/lineage-assets/tests",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/definitions/RunEvent",
    }
    assert _http_json(f"{settings.marquez_api_url}/api/v1/lineage", event)[0] == 201
    for base in (settings.marquez_api_url, settings.marquez_web_url):  # directly, then through the UI's proxy
        status, stored = _http_json(f"{base}/api/v1/namespaces/stack_probe/jobs/{job}")
        assert status == 200 and stored["latestRun"]["state"] == "COMPLETED"
        assert [output["name"] for output in stored["outputs"]] == [f"{job}_out"]
    with urllib.request.urlopen(settings.marquez_web_url, timeout=10) as page:
        assert b"bundle.js" in page.read()


def test_marquez_services_listen_on_the_stack_host_only(stack, settings):
    assert settings.host == "127.0.0.1"
    for port in (settings.marquez_port, settings.marquez_admin_port, settings.marquez_web_port):
        assert _listening_addresses(port) == {"127.0.0.1"}, port


def test_marquez_web_runs_against_a_marquez_elsewhere(stack, settings, tmp_path):
    # The test stack's Marquez plays a remote one: only the UI starts, nothing it would otherwise require.
    remote = isolated_settings(
        "remote-marquez-probe", offset=13000, state_dir=tmp_path / "state", marquez_url=settings.marquez_api_url
    )
    supervisor = Supervisor(remote)
    try:
        assert [status.name for status in supervisor.up(["marquez-web"]) if status.healthy] == ["marquez-web"]
        assert len(_processes_using(remote.state_dir)) == 1
        status, namespaces = _http_json(f"{remote.marquez_web_url}/api/v1/namespaces")
        assert status == 200 and "namespaces" in namespaces
    finally:
        supervisor.down()

"""Spark's configuration from the settings, and the class-sharing archive's name."""

from __future__ import annotations

import dataclasses
import sys

import pytest

from lineage_assets import spark_conf
from lineage_assets.lineage.spark_agent import LISTENER as SPARK_AGENT_LISTENER
from lineage_assets.settings import Settings


@pytest.fixture
def settings(tmp_path) -> Settings:
    jars = tmp_path / "cache" / "jars" / "spark"
    jars.mkdir(parents=True)
    (jars / "iceberg.jar").write_bytes(b"one")
    return Settings(
        cache_dir=tmp_path / "cache",
        catalog_name="lake",
        catalog_url="http://catalog:8181",
        s3_endpoint="https://s3.example",
        warehouse_bucket="wh",
    )


def test_the_catalog_and_s3_come_from_the_settings(settings):
    conf = spark_conf.spark_conf(settings)
    assert conf["spark.sql.catalog.lake.uri"] == "http://catalog:8181"
    assert conf["spark.sql.catalog.lake.warehouse"] == "s3://wh/"
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "https://s3.example"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "true"


@pytest.mark.parametrize(
    ("location", "manager"),
    [
        ("", spark_conf.LOCAL_CHECKPOINT_MANAGER),
        ("/srv/checkpoints", spark_conf.LOCAL_CHECKPOINT_MANAGER),
        ("file:///srv/checkpoints", spark_conf.LOCAL_CHECKPOINT_MANAGER),
        ("s3://shared/checkpoints", None),
    ],
)
def test_a_local_checkpoint_is_renamed_through_the_file_system_api_and_a_bucket_keeps_sparks_default(
    settings, location, manager
):
    conf = spark_conf.spark_conf(dataclasses.replace(settings, checkpoint_location=location))
    assert conf.get("spark.sql.streaming.checkpointFileManagerClass") == manager


def test_a_local_master_and_the_stacks_cluster_take_the_jars_on_their_class_path_and_others_as_spark_jars(settings):
    local = spark_conf.spark_conf(settings)
    assert local["spark.driver.extraClassPath"].endswith("iceberg.jar") and "spark.jars" not in local
    # Spark's slf4j API before the connectors' (the AWS SDK bundle has an unshaded 1.x API).
    assert local["spark.driver.extraClassPath"].split(":")[0].rsplit("/", 1)[-1].startswith("slf4j-api-2.")
    # The stack's own workers share this machine's jars: no executor copies them into its folder.
    own = spark_conf.spark_conf(dataclasses.replace(settings, spark_master=settings.local_spark_cluster_url))
    assert own["spark.executor.extraClassPath"] == own["spark.driver.extraClassPath"] and "spark.jars" not in own
    cluster = spark_conf.spark_conf(dataclasses.replace(settings, spark_master="spark://spark.example:7077"))
    assert cluster["spark.jars"].endswith("iceberg.jar") and "spark.driver.extraClassPath" not in cluster
    # The driver's class-sharing archive records its class path: each way has its own.
    assert spark_conf.driver_class_archive(settings) != spark_conf.driver_class_archive(
        dataclasses.replace(settings, spark_master="spark://spark.example:7077")
    )


def test_without_jars_the_error_says_to_run_setup(tmp_path):
    with pytest.raises(FileNotFoundError, match="run `make setup`"):
        spark_conf.spark_conf(Settings(cache_dir=tmp_path))


def test_the_class_archive_is_used_only_once_written_and_is_renamed_when_a_jar_changes(settings):
    archive = spark_conf.driver_class_archive(settings)
    assert spark_conf.class_sharing_options(settings) == []
    archive.parent.mkdir(parents=True)
    archive.touch()
    assert spark_conf.class_sharing_options(settings) == [f"-XX:SharedArchiveFile={archive}"]
    (settings.jars_dir / "spark" / "iceberg.jar").write_bytes(b"a newer jar")
    assert spark_conf.driver_class_archive(settings) != archive
    assert spark_conf.class_sharing_options(Settings(cache_dir=settings.cache_dir, spark_class_sharing=False)) == []


def test_the_job_that_writes_the_class_archive_loads_the_lineage_agent_unless_it_has_listeners(tmp_path):
    archive, scratch = tmp_path / "driver.jsa", tmp_path / "agent-events.jsonl"
    writing = spark_conf.class_archive_writing_conf({"spark.app.name": "fill"}, archive, scratch)
    assert writing["spark.app.name"] == "fill"
    assert writing["spark.extraListeners"] == SPARK_AGENT_LISTENER  # its classes go into the archive
    assert writing["spark.openlineage.transport.location"] == str(scratch)  # not the project's log
    # The collector of the jobs that will map the archive.
    assert writing[spark_conf.DRIVER_JAVA_OPTIONS].startswith(
        f"{spark_conf.JVM_OPTIONS} -XX:ArchiveClassesAtExit={archive} "
    )

    asset_run = {
        "spark.extraListeners": SPARK_AGENT_LISTENER,
        "spark.openlineage.transport.location": "/lineage/run.jsonl",
    }
    writing = spark_conf.class_archive_writing_conf(asset_run, archive, scratch)
    assert writing["spark.openlineage.transport.location"] == "/lineage/run.jsonl"  # the run's own events stay its own
    own = spark_conf.class_archive_writing_conf({"spark.extraListeners": "com.example.Listener"}, archive, scratch)
    assert own["spark.extraListeners"] == "com.example.Listener" and "spark.openlineage.transport.type" not in own


def test_the_submit_command_puts_the_conf_before_the_script_and_its_arguments(settings, tmp_path):
    secret = dataclasses.replace(settings, s3_secret_key="s3cr3t\\with-backslash")
    secrets = tmp_path / "private" / "spark-secrets.properties"
    command = spark_conf.spark_submit_command(
        secret, tmp_path / "job.py", ["--day", "2026-11-23"], {"spark.app.name": "x"}, secrets_file=secrets
    )
    script = command.index(str(tmp_path / "job.py"))
    assert command[0].endswith("spark-submit") and command[script + 1 :] == ["--day", "2026-11-23"]
    assert "spark.app.name=x" in command[:script] and "spark.sql.session.timeZone=UTC" in command[:script]
    # The credentials are in a file of the owner's, in Java's properties syntax, never on the command line.
    assert not [part for part in command if "s3cr3t" in part or "local-access-key" in part]
    assert command[command.index("--properties-file") + 1] == str(secrets) and secrets.stat().st_mode & 0o777 == 0o600
    assert secrets.read_text().splitlines() == [
        "spark.hadoop.fs.s3a.access.key=local-access-key",
        "spark.hadoop.fs.s3a.secret.key=s3cr3t\\\\with-backslash",
    ]
    with pytest.raises(ValueError, match="spark.hadoop.fs.s3a.access.key, spark.hadoop.fs.s3a.secret.key: secret"):
        spark_conf.spark_submit_command(settings, tmp_path / "job.py", [])


def test_on_a_standalone_cluster_a_job_takes_its_share_and_its_executors_reach_the_driver(settings):
    assert "spark.cores.max" not in spark_conf.spark_conf(settings)  # local mode
    conf = spark_conf.spark_conf(
        dataclasses.replace(settings, spark_master="spark://10.0.0.5:7077", host="10.0.0.9", spark_cores_per_job=3)
    )
    assert conf["spark.master"] == "spark://10.0.0.5:7077" and conf["spark.cores.max"] == "3"
    assert conf["spark.driver.host"] == conf["spark.driver.bindAddress"] == "10.0.0.9"
    assert conf["spark.pyspark.python"] == sys.executable

"""Settings are checked as a whole before anything runs: every problem is one line naming the variable
and its value; good settings pass unchanged."""

from __future__ import annotations

import dataclasses

import pytest

from lineage_assets.settings import SettingsError
from lineage_assets.settings_environment import as_environment, secrets_file_text, settings_from_env
from lineage_assets.settings_validation import problems_of, validated

DEFAULTS = settings_from_env({})


def test_the_defaults_and_a_remote_setup_are_good():
    remote = dataclasses.replace(
        DEFAULTS,
        kafka_bootstrap="kafka-1.example:9092,kafka-2.example:9092",
        s3_endpoint="https://s3.example",
        spark_master="spark://spark.example:7077",
        spark_driver_memory="512M",
    )
    assert validated(DEFAULTS) is DEFAULTS and problems_of(remote) == []


def test_each_problem_is_one_line_naming_the_variable_and_its_value():
    bad = dataclasses.replace(
        DEFAULTS,
        kafka_bootstrap="kafka.example",
        catalog_url="ftp://catalog.example",
        spark_executor_memory="lots",
        kafka_brokers=2,
        warehouse_bucket="Warehouse",
        deployment_backend="k8s",
        max_records_per_batch=-1,
        orphan_file_age_hours=1,
        snapshots_kept=1,
        upkeep_schedule="every hour",
    )
    assert problems_of(bad) == [
        "LINEAGE_ASSETS_CATALOG_URL='ftp://catalog.example': an http:// or https:// URL with a host",
        "LINEAGE_ASSETS_KAFKA_BOOTSTRAP='kafka.example': 'kafka.example' is not HOST:PORT (servers "
        "separated by commas)",
        "LINEAGE_ASSETS_SPARK_EXECUTOR_MEMORY='lots': a JVM memory size such as 512m or 2g",
        "LINEAGE_ASSETS_KAFKA_BROKERS=2: the local Kafka has 1 or 3 brokers",
        "LINEAGE_ASSETS_MAX_RECORDS_PER_BATCH=-1: 0 or more",
        "LINEAGE_ASSETS_SNAPSHOTS_KEPT=1: 2 or more: a restarted stream looks its last batch's snapshot up among them",
        "LINEAGE_ASSETS_ORPHAN_FILE_AGE_HOURS=1: 24 or more: younger files may belong to a write still in flight",
        "LINEAGE_ASSETS_UPKEEP_SCHEDULE='every hour': a cron schedule of five fields, such as '23 * * * *'",
        "LINEAGE_ASSETS_DEPLOYMENT_BACKEND='k8s': local or docker",
        "LINEAGE_ASSETS_WAREHOUSE_BUCKET='Warehouse': an S3 bucket name: 3 to 63 lower-case letters, "
        "digits, '.' and '-'",
    ]
    with pytest.raises(SettingsError) as raised:
        validated(bad)
    assert str(raised.value).splitlines() == problems_of(bad)


def test_a_value_of_the_wrong_type_names_its_variable():
    with pytest.raises(SettingsError, match="LINEAGE_ASSETS_KAFKA_PORT='nine' is not a valid int"):
        settings_from_env({"LINEAGE_ASSETS_KAFKA_PORT": "nine"})


def test_secrets_come_from_the_secrets_file_for_those_the_environment_lacks(tmp_path):
    chosen = dataclasses.replace(DEFAULTS, s3_secret_key="from-the-file", postgres_password="p=w", kafka_port=29092)
    secrets = tmp_path / "secrets.env"
    secrets.write_text(secrets_file_text(chosen))
    shown = as_environment(chosen, secrets=False)
    assert "from-the-file" not in str(shown) and "LINEAGE_ASSETS_SECRETS_FILE" not in shown
    read = settings_from_env({**shown, "LINEAGE_ASSETS_SECRETS_FILE": str(secrets)})
    assert dataclasses.replace(read, secrets_file="") == chosen
    # A variable in the environment wins over the file.
    assert (
        settings_from_env(
            {"LINEAGE_ASSETS_SECRETS_FILE": str(secrets), "LINEAGE_ASSETS_S3_SECRET_KEY": "from-the-environment"}
        ).s3_secret_key
        == "from-the-environment"
    )


def test_a_bad_secrets_file_is_named_without_showing_its_lines(tmp_path):
    secrets = tmp_path / "secrets.env"
    secrets.write_text("LINEAGE_ASSETS_S3_SECRET_KEY=fine\nLINEAGE_ASSETS_KAFKA_PORT=1\n")
    with pytest.raises(
        SettingsError, match=r"SECRETS_FILE='.*secrets.env': line 2: LINEAGE_ASSETS_KAFKA_PORT is not a"
    ):
        settings_from_env({"LINEAGE_ASSETS_SECRETS_FILE": str(secrets)})
    secrets.write_text("a-bare-secret\n")
    with pytest.raises(SettingsError, match="line 1: it is not NAME=value") as raised:
        settings_from_env({"LINEAGE_ASSETS_SECRETS_FILE": str(secrets)})
    assert "a-bare-secret" not in str(raised.value)
    with pytest.raises(SettingsError, match=r"SECRETS_FILE='.*missing.env': cannot be read \(No such file"):
        settings_from_env({"LINEAGE_ASSETS_SECRETS_FILE": str(tmp_path / "missing.env")})
    with pytest.raises(SettingsError, match="LINEAGE_ASSETS_S3_SECRET_KEY: a secret setting is one line"):
        secrets_file_text(dataclasses.replace(DEFAULTS, s3_secret_key="two\nlines"))

"""Without static S3 keys, boto3 and Spark's S3A both take the AWS default credential chain, as a
platform's instance role, profile or web identity is reached; the preflight names the chain when it
finds nothing or its credentials are refused."""

from __future__ import annotations

import dataclasses
import subprocess
import uuid

import pytest

from lineage_assets.connections import s3_client
from lineage_assets.preflight import refused
from lineage_assets.spark_conf import spark_submit_command, spark_submit_env

# A job that reads one object through S3A and writes its text back under another key.
COPY_JOB = """
import sys
from pyspark.sql import SparkSession

spark = SparkSession.builder.getOrCreate()
spark.read.text(sys.argv[1]).write.mode("overwrite").text(sys.argv[2])
"""


@pytest.fixture
def profile_environment(settings, tmp_path, monkeypatch) -> dict[str, str]:
    """An AWS shared credentials file with the stack's S3 identity as profile `lakehouse`, named by
    the variables the SDKs read; nothing else of the chain answers here."""
    credentials = tmp_path / "credentials"
    credentials.write_text(
        f"[lakehouse]\naws_access_key_id = {settings.s3_access_key}\naws_secret_access_key = {settings.s3_secret_key}\n"
    )
    credentials.chmod(0o600)
    environment = {
        "AWS_SHARED_CREDENTIALS_FILE": str(credentials),
        "AWS_CONFIG_FILE": str(tmp_path / "no-config"),
        "AWS_PROFILE": "lakehouse",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    return environment


def test_without_static_keys_boto3_and_spark_use_the_profile_the_chain_names(
    stack, settings, tmp_path, profile_environment
):
    chained = dataclasses.replace(settings, s3_access_key="", s3_secret_key="")
    key = f"credential-chain/{uuid.uuid4().hex}"
    s3_client(chained).put_object(Bucket=settings.archive_bucket, Key=f"{key}/in.txt", Body=b"through the chain\n")
    assert refused(chained) == []

    script = tmp_path / "copy_through_s3a.py"  # not copy.py: the standard library has a module of that name
    script.write_text(COPY_JOB)
    source, target = (f"s3://{settings.archive_bucket}/{key}/{name}" for name in ("in.txt", "out"))
    command = spark_submit_command(chained, script, [source, target], secrets_file=tmp_path / "secrets.properties")
    assert not (tmp_path / "secrets.properties").exists()  # no static key: nothing secret to hand over
    done = subprocess.run(command, env=spark_submit_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]

    listed = s3_client(settings).list_objects_v2(Bucket=settings.archive_bucket, Prefix=f"{key}/out/")
    parts = [item["Key"] for item in listed.get("Contents", []) if item["Key"].endswith(".txt")]
    assert parts, f"the job wrote nothing under {target}"
    written = s3_client(settings).get_object(Bucket=settings.archive_bucket, Key=parts[0])["Body"].read()
    assert written == b"through the chain\n"


def test_the_preflight_names_the_chain_when_it_finds_nothing_or_the_store_refuses_it(
    stack, settings, tmp_path, profile_environment, monkeypatch
):
    chained = dataclasses.replace(settings, s3_access_key="", s3_secret_key="")
    credentials = tmp_path / "credentials"
    credentials.write_text(
        f"[lakehouse]\naws_access_key_id = {settings.s3_access_key}\naws_secret_access_key = not-the-secret\n"
    )
    (problem,) = refused(chained)
    assert problem == (
        f"S3 at {settings.s3_url} refused the credentials (403): the AWS default credential chain (no static keys set)"
    )

    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.delenv("AWS_PROFILE")
    (problem,) = refused(chained)
    assert (
        problem
        == f"S3 at {settings.s3_url}: the AWS default credential chain found no credentials (no static keys set)"
    )

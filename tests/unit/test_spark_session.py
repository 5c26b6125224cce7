"""The in-process Spark session (the asset checks' and the tests'): the settings' configuration, with
the secret entries never on the command line of the JVM pyspark starts."""

from __future__ import annotations

import os
from pathlib import Path

from pyspark import SparkContext

from lineage_assets.spark_conf import PYSPARK_SUBMIT_ARGS


def test_the_session_has_the_s3_secret_and_its_jvm_command_line_does_not(spark, settings):
    jvm = SparkContext._gateway.proc  # pyspark keeps the JVM it started here
    command = Path(f"/proc/{jvm.pid}/cmdline").read_bytes().split(b"\0")
    assert settings.s3_secret_key.encode() not in b"\0".join(command)
    assert settings.s3_access_key.encode() not in b"\0".join(command)
    assert b"--conf" in command and b"--properties-file" in command  # the rest as arguments, the secrets not
    properties = command[command.index(b"--properties-file") + 1].decode()
    assert not Path(properties).exists()  # read by the JVM as it started, then deleted
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.hadoop.fs.s3a.secret.key") == settings.s3_secret_key
    assert conf.get("spark.hadoop.fs.s3a.endpoint") == settings.s3_url
    assert PYSPARK_SUBMIT_ARGS not in os.environ  # the process's environment as it was

"""Spark drivers map their classes from a class-data-sharing archive written by the first successful
job (lineage_assets/spark_conf.py): real spark-submits of a probe script, no servers needed."""

from __future__ import annotations

import dataclasses
import textwrap

import pytest

from lineage_assets import spark_conf
from lineage_assets.resources import spark_jobs
from lineage_assets.resources.spark_jobs import SparkJobError

PROBE = textwrap.dedent("""
    import argparse, json
    from pyspark.sql import SparkSession
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--report", required=True)
    args = parser.parse_args()
    spark = SparkSession.builder.getOrCreate()
    with open(args.report, "w") as out:
        json.dump({"rows": spark.range(args.rows).count()}, out)
    spark.stop()
""")


@pytest.fixture
def archive(tmp_path, monkeypatch):
    """A fresh archive location, so the test sees training happen (the session's own archive is left alone)."""
    path = tmp_path / "class-sharing" / "driver.jsa"
    for module in (spark_conf, spark_jobs):
        monkeypatch.setattr(module, "driver_class_archive", lambda settings: path)
    return path


def test_the_first_successful_job_writes_the_archive_that_later_drivers_map(settings, tmp_path, archive, spark_jobs):
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)

    with pytest.raises(SparkJobError, match="invalid int value: 'many'"):
        spark_jobs.submit(str(probe), ["--rows", "many"])
    assert not archive.exists() and list(archive.parent.iterdir()) == []  # a failed job's archive is not kept
    assert spark_conf.spark_conf(settings)[spark_conf.DRIVER_JAVA_OPTIONS] == spark_conf.spark_java_options(settings)

    assert spark_jobs.submit(str(probe), ["--rows", "5"]) == {"rows": 5}
    assert archive.is_file() and [p.name for p in archive.parent.iterdir()] == [archive.name]
    assert (
        spark_conf.spark_conf(settings)[spark_conf.DRIVER_JAVA_OPTIONS]
        == f"{spark_conf.JVM_OPTIONS} -XX:SharedArchiveFile={archive} {settings.spark_java_options}".strip()
    )

    # -Xshare:on makes the JVM refuse to start unless it maps the archive.
    written = archive.stat().st_mtime_ns
    assert spark_jobs.submit(
        str(probe), ["--rows", "7"], extra_conf={"spark.driver.extraJavaOptions": "-Xshare:on"}
    ) == {"rows": 7}
    assert archive.stat().st_mtime_ns == written  # used, not written again


def test_an_archive_is_named_after_the_jars_it_was_made_with_and_can_be_turned_off(settings, tmp_path):
    jars = tmp_path / "jars" / "spark"
    jars.mkdir(parents=True)
    (jars / "iceberg-spark-runtime.jar").write_bytes(b"v1")
    local = dataclasses.replace(settings, cache_dir=tmp_path)
    before = spark_conf.driver_class_archive(local)
    assert before.parent == tmp_path / "class-sharing"
    (jars / "iceberg-spark-runtime.jar").write_bytes(b"v2 is longer")
    assert spark_conf.driver_class_archive(local) != before  # a changed jar gets a new archive, never a stale one

    spark_conf.driver_class_archive(local).parent.mkdir(parents=True)
    spark_conf.driver_class_archive(local).write_bytes(b"archive")
    assert spark_conf.class_sharing_options(local) == [
        f"-XX:SharedArchiveFile={spark_conf.driver_class_archive(local)}"
    ]
    assert spark_conf.class_sharing_options(dataclasses.replace(local, spark_class_sharing=False)) == []

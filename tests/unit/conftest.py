"""Unit-test fixtures: a local Spark with only the spark-avro jar; no servers."""

from __future__ import annotations

import io
import struct

import fastavro
import pytest

from lineage_assets.settings import Settings


@pytest.fixture(scope="session")
def local_spark():
    from pyspark.sql import SparkSession

    avro_jars = sorted((Settings.from_env().jars_dir / "spark").glob("spark-avro_*.jar"))
    assert avro_jars, "run `make setup` first: the spark-avro jar is missing"
    session = (
        SparkSession.builder.master("local[2]").appName("unit")
        .config("spark.jars", str(avro_jars[0]))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    yield session
    session.stop()


def confluent_avro(schema: dict, record: dict, schema_id: int) -> bytes:
    """A value in the Confluent wire format: magic byte 0, big-endian schema id, Avro body."""
    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema(schema), record)
    return b"\x00" + struct.pack(">I", schema_id) + body.getvalue()

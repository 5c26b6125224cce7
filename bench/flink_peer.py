"""Runs the Flink peer of the ingestion (``bench/flink_ingestion.py``) as one subject of the
throughput benchmark's rounds, and checks that it wrote what the project's ingestion wrote.

The peer runs in its own interpreter (``make flink-peer``: ``.cache/flink-peer``, PyFlink from
pyproject.toml's ``flink-peer`` group) with its connector jars (``.cache/jars/flink-peer``) on the
PyFlink gateway's classpath. It runs on Flink's local mini-cluster with as many task slots as a
Spark job has cores. Its rate is rows over the Flink job's net runtime: from the job's start to its
end, the last Iceberg commit included. That compares with the project's query time, since neither
counts the JVM start or the catalog set-up before the job.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from bench import iceberg_tables
from lineage_assets.datasets import LAKEHOUSE_ORDERS
from lineage_assets.settings import Settings

JOB = Path(__file__).with_name("flink_ingestion.py")
TABLE = "bench_flink_orders"
COMPARED_COLUMNS = tuple(column.name for column in LAKEHOUSE_ORDERS.columns)


def interpreter(settings: Settings) -> Path:
    python = settings.cache_dir / "flink-peer" / "bin" / "python"
    jars = settings.jars_dir / "flink-peer"
    if not python.exists() or not any(jars.glob("*.jar")):
        raise RuntimeError(f"the Flink peer is not installed ({python}, {jars}): run `make flink-peer`")
    return python


def command(settings: Settings, table: str, report: Path) -> list[str]:
    options = {
        "bootstrap-servers": settings.kafka_servers, "topic": settings.orders_topic, "registry-url": settings.schema_registry_url,
        "catalog-url": settings.iceberg_catalog_url, "warehouse": settings.warehouse_url, "s3-endpoint": settings.s3_url,
        "s3-access-key": settings.s3_access_key, "s3-secret-key": settings.s3_secret_key, "s3-region": settings.s3_region,
        "namespace": settings.iceberg_namespace, "table": table, "parallelism": settings.spark_cores_per_job,
        "report": report,
    }
    return [str(interpreter(settings)), str(JOB), *(part for key, value in options.items() for part in (f"--{key}", str(value)))]


def environment(settings: Settings, log_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        # PyFlink's gateway puts HADOOP_CLASSPATH on its classpath: the connectors, Iceberg and Hadoop's client.
        "HADOOP_CLASSPATH": f"{settings.jars_dir / 'flink-peer'}/*",
        # s3proxy rejects the AWS SDK's default flexible-checksum headers (as for the stack's catalog).
        "AWS_REQUEST_CHECKSUM_CALCULATION": "WHEN_REQUIRED", "AWS_RESPONSE_CHECKSUM_VALIDATION": "WHEN_REQUIRED",
        "FLINK_LOG_DIR": str(log_dir),
    }


class PeerRounds:
    """Bounded runs of the Flink peer over the bench topic, each into its table dropped first. The
    first round's rows must equal ``reference_table``'s (the project's ingestion, measured before it
    in the same round) before any rate counts."""

    def __init__(self, settings: Settings, count: int, reference_table: str):
        self.settings, self.count, self.reference_table = settings, count, reference_table
        self.folder = settings.state_dir / "bench-throughput" / "flink-peer"
        self.profiles: list[dict] = []

    def __call__(self, round_number: int) -> float:
        self.folder.mkdir(parents=True, exist_ok=True)
        iceberg_tables.drop(self.settings, TABLE)
        report, log = self.folder / "report.json", self.folder / f"round-{round_number}.log"
        report.unlink(missing_ok=True)
        started = time.monotonic()
        with log.open("w") as output:
            finished = subprocess.run(command(self.settings, TABLE, report), stdout=output, stderr=subprocess.STDOUT,
                                      env=environment(self.settings, self.folder / "flink-logs"), timeout=1800)
        wall_s = round(time.monotonic() - started, 3)
        if finished.returncode != 0 or not report.exists():
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
            raise RuntimeError(f"the Flink peer failed (exit {finished.returncode}); log: {log}\n{tail}")
        written = iceberg_tables.rows(self.settings, TABLE, COMPARED_COLUMNS)
        if len(written) != self.count:
            raise RuntimeError(f"the Flink peer wrote {len(written)} rows, expected {self.count}")
        if round_number == 0:
            self.check_equal(written)
        self.profiles.append({**json.loads(report.read_text()), "process_s": wall_s})
        return self.count / self.profiles[-1]["job_net_runtime_s"]

    def check_equal(self, written: list[tuple]) -> None:
        expected = iceberg_tables.rows(self.settings, self.reference_table, COMPARED_COLUMNS)
        if written != expected:
            differing = next((pair for pair in zip(written, expected) if pair[0] != pair[1]), None)
            raise RuntimeError(f"the Flink peer's rows differ from {self.reference_table}'s ({len(written)} against "
                               f"{len(expected)} rows); first difference, peer then project: {differing}")

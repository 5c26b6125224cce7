"""A Spark standalone cluster, opt-in: ``LINEAGE_ASSETS_SPARK_MASTER=spark://HOST:SPARK_CLUSTER_PORT``."""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from lineage_assets.settings import Settings
from lineage_assets.spark_conf import spark_home
from lineage_assets.stack.services.base import (
    Service,
    java,
)


def _spark_daemon(settings: Settings, main_class: str, *arguments: str) -> list[str]:
    # Spark's launcher (bin/spark-class) ends in `exec java -cp <jars> <class>`: run that command
    # itself, so the supervisor finds the process under the command line it recorded.
    return [java(), "-Xmx512m", "-cp", f"{spark_home() / 'jars'}/*", main_class, *arguments]


def _spark_env(settings: Settings) -> dict[str, str]:
    """What bin/load-spark-env.sh would export: a worker builds its executors' command from these."""
    (core,) = (spark_home() / "jars").glob("spark-core_*.jar")  # spark-core_2.13-4.0.0.jar
    return {
        "SPARK_HOME": str(spark_home()),
        "SPARK_SCALA_VERSION": core.name.split("_")[1].split("-")[0],
        "SPARK_LOCAL_IP": settings.host,
    }  # the daemons' web UIs bind there too


def spark_master_state(settings: Settings) -> dict[str, Any] | None:
    """The master's view of the cluster (its status, workers and applications), None when it does not answer."""
    try:
        with urllib.request.urlopen(
            f"http://{settings.host}:{settings.spark_cluster_web_port}/json/", timeout=2
        ) as response:
            state: dict[str, Any] = json.load(response)
            return state
    except (urllib.error.URLError, OSError, ValueError):
        return None


def spark_worker_port(settings: Settings, number: int) -> int:
    return settings.spark_cluster_web_port + 2 * number - 1


SPARK_MASTER: Service = Service(
    name="spark-master",
    wanted=lambda s: s.runs_spark_cluster,
    ports=lambda s: [s.spark_cluster_port, s.spark_cluster_web_port],
    command=lambda s: _spark_daemon(
        s,
        "org.apache.spark.deploy.master.Master",
        "--host",
        s.host,
        "--port",
        str(s.spark_cluster_port),
        "--webui-port",
        str(s.spark_cluster_web_port),
    ),
    healthy=lambda s: (spark_master_state(s) or {}).get("status") == "ALIVE",
    address=lambda s: s.local_spark_cluster_url,
    prepare=lambda s: SPARK_MASTER.data_dir(s).mkdir(parents=True, exist_ok=True),
    env=_spark_env,
)


def spark_worker(number: int) -> Service:
    def registered(settings: Settings) -> bool:
        address = (settings.host, spark_worker_port(settings, number))
        workers = (spark_master_state(settings) or {}).get("workers", [])
        return any((w.get("host"), w.get("port")) == address and w.get("state") == "ALIVE" for w in workers)

    def command(settings: Settings) -> list[str]:
        return _spark_daemon(
            settings,
            "org.apache.spark.deploy.worker.Worker",
            settings.local_spark_cluster_url,
            "--host",
            settings.host,
            "--port",
            str(spark_worker_port(settings, number)),
            "--webui-port",
            str(spark_worker_port(settings, number) + 1),
            "--cores",
            str(settings.spark_worker_cores),
            "--memory",
            settings.spark_worker_memory,
            "--work-dir",
            str(settings.state_dir / f"spark-worker-{number}" / "work"),
        )

    return Service(
        name=f"spark-worker-{number}",
        wanted=lambda s: s.runs_spark_cluster,
        ports=lambda s: [spark_worker_port(s, number), spark_worker_port(s, number) + 1],
        command=command,
        healthy=registered,  # alive, and registered with the master
        address=lambda s: f"{s.host}:{spark_worker_port(s, number)}",
        prepare=lambda s: (s.state_dir / f"spark-worker-{number}" / "work").mkdir(parents=True, exist_ok=True),
        requires=("spark-master",),
        # A worker launches executors from SPARK_HOME; they run this interpreter's Python.
        env=lambda s: {**_spark_env(s), "PYSPARK_PYTHON": sys.executable},
    )


SPARK_WORKERS = (spark_worker(1), spark_worker(2))

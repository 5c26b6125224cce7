"""Spark configuration derived from the settings: jars, the Iceberg catalog, S3, and how to submit a job.

Both the Dagster resources (which ``spark-submit`` the scripts under ``spark/``) and the tests (which
build an in-process session) ask this module, so a job and its test never see different catalogs.

Storage: Spark talks to an Iceberg REST catalog (the local one keeps its state in PostgreSQL) and
reads and writes files under ``s3://warehouse/``. A REST catalog, because openlineage-spark names
REST tables by location plus a catalog symlink, and drops JDBC-catalog tables from lineage. Both
buckets are read and written through Hadoop's S3A filesystem mapped onto the ``s3://`` scheme: one
S3 client configuration serves the archive and the warehouse, and locations carry the scheme
OpenLineage's naming spec uses for S3 (``s3://bucket``).

Start-up: a Spark driver JVM loads some 28,000 classes, a quarter of a small job's time. With
``spark_class_sharing`` on, drivers map them from a JDK class-data-sharing archive (dynamic CDS) that
the first successful batch job writes as it exits. The archive is named after what it depends on
(the JDK, Spark and where it is installed, the connector jars and their paths, the conf folder on
the classpath), so a change makes a new one; a JVM that finds an archive it cannot use loads its
classes as usual.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import sys
import tempfile
import threading
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING

from lineage_assets.connections import jvm_trust_options
from lineage_assets.lineage.spark_agent import agent_conf
from lineage_assets.private_files import write_private
from lineage_assets.settings import PROJECT_ROOT, Settings
from lineage_assets.settings_environment import secret_in_effect

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def spark_jars(settings: Settings) -> list[Path]:
    jars = sorted((settings.jars_dir / "spark").glob("*.jar"))
    if not jars:
        raise FileNotFoundError(f"no Spark connector jars in {settings.jars_dir / 'spark'}: run `make setup`")
    return jars


def jar_conf(settings: Settings) -> dict[str, str]:
    """How the connector jars reach the JVMs. A local master's one JVM, and the executors of the stack's
    own cluster (its workers run on this machine), find them on their class path at fixed paths: the
    class-sharing archive then holds the driver's classes, and nothing is copied. As ``spark.jars``
    each run copies them to a temporary folder and its tasks load their classes from there again (the
    ingestion of 2 M orders: about 1 s of its query and 4 s of its start-up), and a cluster's worker
    copies them, 600 MB with the AWS SDK's bundle, into every executor's folder. Another cluster's
    executors fetch ``spark.jars``."""
    jars = spark_jars(settings)
    if settings.spark_master.startswith("local") or settings.runs_spark_cluster:
        # The class path comes before Spark's jars, and the AWS SDK's bundle carries slf4j's 1.x API
        # unshaded: ahead of Spark's 2.x API it would leave the JVM without a logger (slf4j's NOP).
        slf4j = sorted((spark_home() / "jars").glob("slf4j-api-*.jar"))
        class_path = os.pathsep.join(str(jar) for jar in [*slf4j, *jars])
        executors = {"spark.executor.extraClassPath": class_path} if settings.runs_spark_cluster else {}
        return {"spark.driver.extraClassPath": class_path, **executors}
    return {"spark.jars": ",".join(str(jar) for jar in jars)}


# Spark's options for JVM flags set by the platform; `spark.*.extraJavaOptions` stay the user's.
DRIVER_JAVA_OPTIONS = "spark.driver.defaultJavaOptions"
EXECUTOR_JAVA_OPTIONS = "spark.executor.defaultJavaOptions"
# The throughput collector: a job's JVM wants rows per second, not short pauses, and G1's concurrent
# threads take cores from the tasks. Metaspace's first collection threshold (21 MB by default) is
# crossed while a job's first query generates its classes, and crossing it costs a full collection
# in the middle of that query; 128 MB leaves room for what a job loads besides the shared archive
# (a few tens of MB). The JIT compiles a method once it has run twice as often as by default: on a
# machine of few cores its C2 thread competes with the tasks for them through a job's first minute,
# compiling methods that would have been run only a few more times.
JVM_OPTIONS = "-XX:+UseParallelGC -XX:MetaspaceSize=128m -XX:CompileThresholdScaling=2"


def spark_home() -> Path:
    """pyspark's own Spark distribution: spark-submit, the jars, and the local cluster's daemons run from it."""
    import pyspark

    return Path(pyspark.__file__).parent


def driver_class_archive(settings: Settings) -> Path:
    """Where the Spark driver's class-data-sharing archive for this JDK, Spark and jar set lives."""
    import pyspark

    java = shutil.which(
        "java",
        path=os.pathsep.join(
            filter(
                None,
                [
                    str(Path(os.environ["JAVA_HOME"]) / "bin") if os.environ.get("JAVA_HOME") else None,
                    os.environ.get("PATH"),
                ],
            )
        ),
    )
    # The archive records the classpath's absolute paths: Spark's jars (the venv's pyspark) and the
    # connectors', in the order jar_conf gives them.
    # "agent": archives are written with the lineage agent's classes (class_archive_writing_conf); and
    # with the JVM options of the jobs that map them.
    parts = [
        "agent",
        *(f"{key}={value}" for key, value in jar_conf(settings).items()),
        JVM_OPTIONS,
        str(Path(java).resolve()) if java else "java",
        pyspark.__version__,
        str(spark_home()),
        os.environ.get("SPARK_CONF_DIR", ""),
        *(f"{jar}:{jar.stat().st_size}" for jar in spark_jars(settings)),
    ]
    key = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
    return class_archive_dir(settings) / f"spark-driver-{key}.jsa"


def class_archive_dir(settings: Settings) -> Path:
    """Where the drivers' class-sharing archives are kept, one per classpath and Java."""
    return settings.cache_dir / "class-sharing"


def class_sharing_options(settings: Settings) -> list[str]:
    """The driver option that maps the archive, once a job has written it."""
    if settings.spark_class_sharing and (archive := driver_class_archive(settings)).is_file():
        return [f"-XX:SharedArchiveFile={archive}"]
    return []


def spark_java_options(settings: Settings, *more: str) -> str:
    """A driver's or an executor's JVM options: the platform's, then ``more``, then the settings' own."""
    return " ".join([JVM_OPTIONS, *more, *settings.spark_java_options.split()])


def class_archive_writing_conf(
    conf: dict[str, str], archive: Path, agent_events: Path, java_options: str = JVM_OPTIONS
) -> dict[str, str]:
    """A job's ``conf`` with the driver option that writes an archive of the classes the job loaded,
    as the driver exits. Quietly: the dump lists every class it skips, which would bury a failed job's
    own error.

    Unless the job names listeners of its own, it loads the lineage agent too (its events to
    ``agent_events``, read by no one): every asset run's driver has the agent, and its classes left
    out of the archive cost each such run about a second (the first job may be one without lineage)."""
    agent = {} if "spark.extraListeners" in conf else agent_conf(agent_events)
    return {**agent, **conf, DRIVER_JAVA_OPTIONS: f"{java_options} -XX:ArchiveClassesAtExit={archive} -Xlog:cds*=off"}


def cluster_conf(settings: Settings) -> dict[str, str]:
    """What a job needs on a standalone cluster (``spark://``): a share of the cluster, and this
    interpreter and project for Python work."""
    if not settings.spark_master.startswith("spark://"):
        return {}
    return {
        "spark.cores.max": str(settings.spark_cores_per_job),
        "spark.executor.cores": "1",
        "spark.executor.memory": settings.spark_executor_memory,
        EXECUTOR_JAVA_OPTIONS: spark_java_options(settings, *jvm_trust_options(settings)),
        "spark.pyspark.python": sys.executable,
        "spark.executorEnv.PYTHONPATH": str(PROJECT_ROOT),
    }


def s3_credentials_conf(settings: Settings) -> dict[str, str]:
    """S3A's credentials: the settings' static keys, or else the AWS SDK's default chain (environment,
    ``AWS_PROFILE``'s shared files, web identity, container and instance metadata), as boto3's."""
    s3a = "spark.hadoop.fs.s3a"
    if settings.s3_access_key:
        return {f"{s3a}.access.key": settings.s3_access_key, f"{s3a}.secret.key": settings.s3_secret_key}
    return {f"{s3a}.aws.credentials.provider": "software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider"}


def catalog_auth_conf(settings: Settings, catalog: str) -> dict[str, str]:
    """The Iceberg REST client's own auth properties: a bearer ``token``, or OAuth2 client credentials
    (the tls profile's, for its token server)."""
    credential = secret_in_effect(settings, "catalog_credential")
    conf = {
        # Named, not inferred: Iceberg's client warns at each start that it guessed oauth2 from the keys.
        f"{catalog}.rest.auth.type": "oauth2" if settings.catalog_token or credential else "",
        f"{catalog}.token": settings.catalog_token,
        f"{catalog}.credential": credential,
        f"{catalog}.oauth2-server-uri": settings.catalog_token_endpoint,
        f"{catalog}.scope": settings.catalog_oauth2_scope,
        # A token about to expire is replaced by asking with the credential again: every token server
        # grants client credentials, while the client's default, token exchange, is an extension many refuse.
        f"{catalog}.token-exchange-enabled": "false" if credential else "",
    }
    return {key: value for key, value in conf.items() if value}


# Spark's own choice for a local checkpoint, Hadoop's FileContext, runs `readlink` in a new process for
# each file it renames into the checkpoint, several per micro-batch; the FileSystem API's rename is a
# rename(2). What the FileContext adds, a rename that fails when its target exists, guards against a
# second writer of the checkpoint, which ``streaming.exclusive`` already keeps out.
LOCAL_CHECKPOINT_MANAGER = "org.apache.spark.sql.execution.streaming.FileSystemBasedCheckpointFileManager"


def checkpoint_conf(settings: Settings) -> dict[str, str]:
    """The streaming jobs' checkpoint manager: Spark's default for a checkpoint in a bucket."""
    scheme = urllib.parse.urlparse(settings.checkpoint_location).scheme
    local = scheme in ("", "file")
    return {"spark.sql.streaming.checkpointFileManagerClass": LOCAL_CHECKPOINT_MANAGER} if local else {}


def spark_conf(settings: Settings) -> dict[str, str]:
    catalog = f"spark.sql.catalog.{settings.catalog_name}"
    s3a = "spark.hadoop.fs.s3a"
    return {
        DRIVER_JAVA_OPTIONS: spark_java_options(
            settings, *class_sharing_options(settings), *jvm_trust_options(settings)
        ),
        **cluster_conf(settings),
        # The driver's RPC and block manager listen on the settings' interface only (loopback by
        # default), in local mode too; a cluster's executors reach it there.
        "spark.driver.host": settings.host,
        "spark.driver.bindAddress": settings.host,
        "spark.master": settings.spark_master,
        "spark.driver.memory": settings.spark_driver_memory,
        **jar_conf(settings),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "4",
        **checkpoint_conf(settings),
        # base64() in one line (RFC 4648), not Spark 4's 76-character MIME lines: the dead letters' and
        # the archive's value_base64 decode with any base64 decoder.
        "spark.sql.chunkBase64String.enabled": "false",
        "spark.ui.enabled": "false",
        # Spark logs a listener's slow event whole, with the job's properties unredacted (the S3 secret
        # among them): on a loaded machine that put the secret into the job's log.
        "spark.scheduler.listenerbus.logSlowEvent": "false",
        # What Spark hides in its logs and event logs: its own default's keys and the catalog's credential.
        "spark.redaction.regex": SECRET_KEY.pattern,
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        catalog: "org.apache.iceberg.spark.SparkCatalog",
        f"{catalog}.type": "rest",
        f"{catalog}.uri": settings.iceberg_catalog_url,
        f"{catalog}.warehouse": settings.warehouse_url,
        f"{catalog}.io-impl": "org.apache.iceberg.hadoop.HadoopFileIO",
        **catalog_auth_conf(settings, catalog),
        "spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        f"{s3a}.endpoint": settings.s3_url,
        f"{s3a}.endpoint.region": settings.s3_region,
        **s3_credentials_conf(settings),
        f"{s3a}.path.style.access": "true",
        f"{s3a}.connection.ssl.enabled": str(settings.s3_url.startswith("https")).lower(),
        # s3proxy's filesystem backend does not implement the SDK's newer integrity headers.
        f"{s3a}.checksum.validation": "false",
    }


# Spark's own default of spark.redaction.regex, and the Iceberg REST client's `credential`.
SECRET_KEY = re.compile(r"(?i)secret|password|token|access[.]key|[.]credential$")


def secret_entries(conf: dict[str, str]) -> dict[str, str]:
    """The entries of ``conf`` Spark treats as secret, as a properties file holds them (a backslash
    escaped, as Java's ``Properties.load`` reads one)."""
    return {key: value.replace("\\", "\\\\") for key, value in conf.items() if SECRET_KEY.search(key)}


def write_secrets(path: Path, secret: dict[str, str]) -> Path:
    return write_private(path, "".join(f"{key}={value}\n" for key, value in secret.items()))


def spark_submit_command(
    settings: Settings,
    script: Path,
    arguments: list[str],
    extra_conf: dict[str, str] | None = None,
    secrets_file: Path | None = None,
) -> list[str]:
    """The ``spark-submit`` command line for one of the scripts under ``spark/``. The entries Spark
    treats as secret go into ``secrets_file`` (written here, readable by the owner only), never onto
    the command line, which any user of the machine can read."""
    submit = Path(sys.executable).with_name("spark-submit")
    command = [str(submit)]
    conf = {**spark_conf(settings), **(extra_conf or {})}
    secret = secret_entries(conf)
    if secret:
        if secrets_file is None:
            raise ValueError(f"{', '.join(secret)}: secret Spark settings need a secrets file, not the command line")
        command += ["--properties-file", str(write_secrets(secrets_file, secret))]
    for key, value in conf.items():
        if key not in secret:
            command += ["--conf", f"{key}={value}"]
    return [*command, str(script), *arguments]


# pyspark reads the arguments it adds to the JVM's command line from this variable, once, as it starts the JVM.
PYSPARK_SUBMIT_ARGS = "PYSPARK_SUBMIT_ARGS"
_LAUNCHING = threading.Lock()


def in_process_session(settings: Settings, extra_conf: dict[str, str] | None = None) -> SparkSession:
    """A Spark session in this process with the settings' configuration. pyspark starts its JVM with
    every entry of the session's configuration as a ``--conf`` argument: the secret ones go instead
    through an owner-only properties file, as for ``spark-submit`` jobs, deleted once the JVM has read
    it. A session already running in the process is returned as it is."""
    from pyspark.sql import SparkSession

    conf = {**spark_conf(settings), **(extra_conf or {})}
    secret = secret_entries(conf)
    builder = SparkSession.builder
    for key, value in conf.items():
        if key not in secret:
            builder = builder.config(key, value)
    with _LAUNCHING, tempfile.TemporaryDirectory(prefix="lineage-assets-spark-") as folder:  # owner-only
        secrets_file = write_secrets(Path(folder) / "secrets.properties", secret)
        before = os.environ.get(PYSPARK_SUBMIT_ARGS)
        os.environ[PYSPARK_SUBMIT_ARGS] = f"--properties-file {shlex.quote(str(secrets_file))} pyspark-shell"
        try:
            return builder.getOrCreate()
        finally:
            if before is None:
                del os.environ[PYSPARK_SUBMIT_ARGS]
            else:
                os.environ[PYSPARK_SUBMIT_ARGS] = before


def spark_submit_env() -> dict[str, str]:
    """Environment for ``spark-submit``: this interpreter's pyspark as SPARK_HOME and Python, and the
    project root on the path so the entry points can import the ``spark`` package."""
    return {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")])),
    }


def committed_table(spark, table: str):
    """``table`` as committed now. A session's catalog caches the tables it has read, and the jobs
    that write them run in other processes: a long-lived session (a Dagster process, a test
    session) would otherwise go on reading the snapshot it saw first."""
    spark.sql(f"REFRESH TABLE {table}")
    return spark.table(table)

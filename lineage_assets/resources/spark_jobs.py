"""Runs the scripts under ``spark/`` with ``spark-submit`` and returns their reports."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from collections import deque
from pathlib import Path

import dagster as dg

from lineage_assets.job_specs import PROGRESS_PREFIX, JobSpec, R
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.settings import PROJECT_ROOT
from lineage_assets.spark_conf import (
    class_archive_writing_conf,
    driver_class_archive,
    spark_java_options,
    spark_submit_command,
    spark_submit_env,
)


class SparkJobError(RuntimeError):
    """A Spark job exited non-zero; the message carries the end of its output."""


class SparkJobsResource(dg.ConfigurableResource):
    environment: SettingsResource

    def run(self, job: JobSpec[R], log=None, extra_conf: dict[str, str] | None = None) -> R:
        """Run the job to completion; its report is the result."""
        return job.report(**self.submit(job.script, list(job.arguments), log=log, extra_conf=extra_conf))

    def submit(self, script: str, arguments: list[str], log=None, extra_conf: dict[str, str] | None = None) -> dict:
        """Run ``script`` (a path under the project root) to completion; its report, as written, is the result."""
        settings = self.environment.settings
        archive = driver_class_archive(settings)
        # Without an archive yet, this job writes one as its driver exits (~20 s once); kept if it succeeds.
        training = archive.with_name(f".{archive.name}.{os.getpid()}.{time.monotonic_ns()}")
        trains = settings.spark_class_sharing and not archive.is_file()
        with tempfile.TemporaryDirectory(prefix="spark-report-") as folder:
            report = Path(folder) / "report.json"
            conf = {"spark.app.name": Path(script).stem, **(extra_conf or {})}
            if trains:
                training.parent.mkdir(parents=True, exist_ok=True)
                conf = class_archive_writing_conf(
                    conf, training, Path(folder) / "agent-events.jsonl", spark_java_options(settings)
                )
            command = spark_submit_command(
                settings,
                PROJECT_ROOT / script,
                [*arguments, "--report", str(report)],
                conf,
                secrets_file=Path(folder) / "spark-secrets.properties",
            )
            tail: deque[str] = deque(maxlen=40)
            # Spark 4 leaves an `artifacts` folder in its working directory: keep it in the state folder.
            workdir = settings.state_dir / "spark"
            workdir.mkdir(parents=True, exist_ok=True)
            try:
                with subprocess.Popen(
                    command,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                    env=spark_submit_env(),
                    cwd=workdir,
                ) as process:
                    assert process.stdout is not None  # stdout=PIPE
                    try:
                        for line in process.stdout:
                            tail.append(line.rstrip())
                            if log is not None and (
                                line.startswith(PROGRESS_PREFIX) or " ERROR " in line or "Traceback" in line
                            ):
                                log.info(line.rstrip())
                    except BaseException:  # the run was cancelled: the job must not outlive it
                        process.terminate()
                        raise
                if trains and process.returncode == 0 and training.is_file():
                    training.replace(archive)
            finally:
                training.unlink(missing_ok=True)
            if process.returncode != 0:
                raise SparkJobError(f"{script} exited with code {process.returncode}:\n" + "\n".join(tail))
            return json.loads(report.read_text())

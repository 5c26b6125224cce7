"""A deployment runner's account of a failed Spark job."""

from __future__ import annotations

import signal

from lineage_assets.streaming.runner import job_error

LOG = """\
26/11/23 10:00:00 INFO SparkContext: Running Spark version 4.0.0
26/11/23 10:00:05 WARN NativeCodeLoader: Unable to load native-hadoop library
Traceback (most recent call last):
  File "/project/spark/ingest_orders.py", line 40, in main
pyspark.errors.exceptions.captured.StreamingQueryException: [STREAM_FAILED] Query terminated with exception
Caused by: org.apache.iceberg.exceptions.RESTException: Unable to connect to http://127.0.0.1:9
\tat org.apache.iceberg.rest.HTTPClient.execute(HTTPClient.java:300)
Caused by: java.net.ConnectException: Connection refused
"""


def test_the_error_names_the_exception_and_its_causes_without_frames_or_info_lines():
    error = job_error(LOG, 1)
    assert error.message.startswith("streaming job exited with code 1: ")
    assert "StreamingQueryException: [STREAM_FAILED]" in error.message
    assert "Caused by: org.apache.iceberg.exceptions.RESTException" in error.message
    assert "Caused by: java.net.ConnectException: Connection refused" in error.message
    assert "HTTPClient.java" not in error.message and "INFO" not in error.stack_trace
    assert "at org.apache.iceberg.rest.HTTPClient" in error.stack_trace and error.language == "PYTHON"


def test_a_job_killed_by_a_signal_says_which():
    assert job_error("", -signal.SIGKILL).message.startswith("streaming job was killed by SIGKILL")

"""What the ``spark-submit`` entry points under ``spark/`` share, one module per concern: their
arguments, their report to the caller, the Kafka source, streaming query runs, the quality numbers
of what they write, and Iceberg tables. Nothing here knows Dagster."""

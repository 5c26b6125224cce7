"""Dagster resources: the environment's settings, Kafka, and the Spark job runner."""

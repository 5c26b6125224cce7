"""Streaming deployments: continuous Spark jobs run and supervised outside Dagster runs."""

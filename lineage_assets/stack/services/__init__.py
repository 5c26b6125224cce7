"""The services of the local stack, one module per family, in the order they start."""

from __future__ import annotations

from lineage_assets.stack.services.base import Service
from lineage_assets.stack.services.catalog import ICEBERG_REST, REGISTRY
from lineage_assets.stack.services.dagster import DAGSTER_SERVICES
from lineage_assets.stack.services.engine import ENGINE
from lineage_assets.stack.services.kafka import KAFKA, KAFKA_NODES
from lineage_assets.stack.services.marquez import MARQUEZ, MARQUEZ_WEB
from lineage_assets.stack.services.proxy import PROXY
from lineage_assets.stack.services.spark_cluster import SPARK_MASTER, SPARK_WORKERS
from lineage_assets.stack.services.storage import POSTGRES, S3
from lineage_assets.stack.services.token_server import TOKEN_SERVER

SERVICES: tuple[Service, ...] = (
    POSTGRES,
    KAFKA,
    *KAFKA_NODES,
    S3,
    ICEBERG_REST,
    REGISTRY,
    MARQUEZ,
    MARQUEZ_WEB,
    TOKEN_SERVER,
    PROXY,
    SPARK_MASTER,
    *SPARK_WORKERS,
    ENGINE,
    *DAGSTER_SERVICES,
)

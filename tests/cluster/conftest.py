"""The cluster profile of the local stack, for the tests of this folder only: its brokers and Spark
cluster stop once they are done, not at the end of the session."""

from __future__ import annotations

import dataclasses

import pytest

from lineage_assets.settings import Settings
from lineage_assets.stack.supervisor import Supervisor
from lineage_assets.testing import isolated_settings

CLUSTER_PORT_OFFSET = 10200
KAFKA_NODES = ["kafka", "kafka-2", "kafka-3"]
SPARK_CLUSTER = ["spark-master", "spark-worker-1", "spark-worker-2"]


@pytest.fixture(scope="package")
def cluster_profile(stack, settings: Settings, tmp_path_factory):
    """The README's cluster profile: three Kafka brokers (the orders topic in three partitions) and a
    Spark standalone cluster of two workers, their own; the other services are the test stack's, with
    an Iceberg namespace and a lineage namespace of the profile's own (its topics live on another
    Kafka: they are other datasets) and an archive prefix of its own (a shared archive would be one
    dataset written from two graphs, and two file sinks in one folder), and the checkpoints in S3 as
    on a cluster of several machines. Yields its settings and supervisor."""
    base = isolated_settings("cluster", offset=CLUSTER_PORT_OFFSET, state_dir=tmp_path_factory.mktemp("cluster"))
    profile = dataclasses.replace(
        base,
        kafka_brokers=3,
        orders_partitions=3,
        spark_master=base.local_spark_cluster_url,
        s3_endpoint=settings.s3_url,
        registry_url=settings.schema_registry_url,
        catalog_url=settings.iceberg_catalog_url,
        marquez_url=settings.marquez_api_url,
        iceberg_namespace="cluster_profile",
        lineage_namespace="lineage_assets_cluster",
        archive_prefix=f"cluster-profile/{settings.archive_prefix}",
        checkpoint_location=f"{settings.warehouse_url}checkpoints/{base.state_dir.name}",
    )
    supervisor = Supervisor(profile, progress=print)
    wanted = {service.name for service in supervisor.selected() if not service.replaced(profile)}
    assert wanted >= {*KAFKA_NODES, *SPARK_CLUSTER}  # the settings alone ask for them
    supervisor.up(KAFKA_NODES + SPARK_CLUSTER)
    yield profile, supervisor
    supervisor.down(KAFKA_NODES + SPARK_CLUSTER)

"""The dataset catalog: names by the OpenLineage naming spec, and a column lineage that only names
columns that exist."""

from __future__ import annotations

import pytest

from lineage_assets.datasets import (
    CHECKS,
    DATASETS,
    LAKEHOUSE_ORDERS,
    ORDERS,
    ORDERS_AVRO_SCHEMA,
    SUPPLIER_STATS,
    iceberg_table_name,
    retired_jobs,
    with_aliases,
)
from lineage_assets.settings import Settings


def test_a_topic_is_named_by_the_first_bootstrap_server_whatever_the_broker_count():
    one = ORDERS.identity(Settings(kafka_bootstrap="broker-1:9092"))
    three = ORDERS.identity(Settings(kafka_bootstrap="broker-1:9092, broker-2:9092,broker-3:9092"))
    assert (one.namespace, one.name) == ("kafka://broker-1:9092", "orders")
    assert three == one


def test_an_iceberg_table_is_named_by_its_location_with_a_symlink_to_the_catalog_table():
    settings = Settings(warehouse_bucket="lake", iceberg_namespace="sales", catalog_url="https://catalog.example/api")
    identity = SUPPLIER_STATS.identity(settings)
    assert (identity.namespace, identity.name) == ("s3://lake", "sales/supplier_stats")
    (symlink,) = identity.symlinks
    assert (symlink.namespace, symlink.name, symlink.type) == (
        "https://catalog.example/api",
        "sales.supplier_stats",
        "TABLE",
    )
    assert iceberg_table_name(settings, "supplier_stats") == "lakehouse.`sales`.supplier_stats"


def test_the_designed_lineage_and_checks_name_only_columns_and_inputs_that_exist():
    for dataset in DATASETS.values():
        names = {column.name for column in dataset.columns}
        assert set(dataset.expected_lineage) == (names if dataset.inputs else set()), dataset.key
        for sources in dataset.expected_lineage.values():
            for source in sources:
                assert source.dataset in dataset.inputs, (dataset.key, source)
                assert source.column in {c.name for c in DATASETS[source.dataset].columns}, (dataset.key, source)
    for check in CHECKS.values():
        assert set(check.columns) <= {c.name for c in DATASETS[check.dataset].columns}, check.name


def test_upstream_is_the_asset_graph():
    assert LAKEHOUSE_ORDERS.upstream == ("orders",)
    assert SUPPLIER_STATS.upstream == ("lakehouse/orders",)
    assert ORDERS.upstream == ()


def test_aliases_are_added_to_the_named_fields_and_an_unknown_field_is_named():
    taught = with_aliases(ORDERS_AVRO_SCHEMA, supplier=("vendor",))
    assert next(f for f in taught["fields"] if f["name"] == "supplier")["aliases"] == ["vendor"]
    assert "aliases" not in ORDERS_AVRO_SCHEMA["fields"][4]  # the reader schema it came from is unchanged
    with pytest.raises(ValueError, match="Order has no field vendor"):
        with_aliases(ORDERS_AVRO_SCHEMA, vendor=("supplier",))


def test_a_renamed_job_retires_its_former_names_and_its_spark_applications():
    retired = retired_jobs()
    assert retired["dagster.supplier_stats"] == retired["supplier_stats_spark"] == SUPPLIER_STATS.job.lineage_name
    assert retired["dagster.supplier_stats.supplier_stats_spark"] == "dagster.daily-supplier-stats"
    # The batch job is the one whose Spark application reports lineage (the agent runs with it alone).
    current = {d.job.lineage_name for d in DATASETS.values()} | {SUPPLIER_STATS.job.spark_application}
    assert not current & set(retired)

"""lineage_assets: a Kafka -> Spark -> Iceberg lakehouse as Dagster assets with OpenLineage lineage."""

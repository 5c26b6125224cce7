"""The Flink peer of the `lakehouse/orders` ingestion: the seed lab's Table API job, in PyFlink.

    python bench/flink_ingestion.py --bootstrap-servers ... --topic orders --registry-url http://... \
        --catalog-url http://... --warehouse s3://warehouse --s3-endpoint http://... --namespace default \
        --table flink_orders --parallelism 2 --report report.json

What the lab's `TableApp` did: the orders topic read with the `avro-confluent` format through the
registry, `price` cast to DECIMAL(10,2), inserted into an Iceberg table (format v2, partitioned by
day(bid_time)) that it creates through Iceberg's Java catalog API, as Flink's DDL has no partition
transforms. Here the catalog is the stack's REST catalog and the source is bounded at the offsets
the topic has when the job starts, so that it is the peer of the project's catch-up run; with
``--checkpoint-ms`` it is unbounded and commits at each checkpoint, as the lab's job ran, until it is
stopped: the peer of a continuous deployment.

It runs in the Flink peer's own interpreter (PyFlink pins its own pyarrow, pandas and numpy) and
imports nothing from the project: `bench/flink_peer.py` gives it every name and address. The
peer of the live windows (`flink_supplier_stats.py`) runs the same way, with this module's helpers.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

from pyflink.java_gateway import get_gateway
from pyflink.table import EnvironmentSettings, TableEnvironment

CATALOG = "peer"


def s3_properties(args: argparse.Namespace) -> dict[str, str]:
    """Iceberg's S3FileIO on the stack's S3 (path-style, as s3proxy serves it)."""
    return {
        "io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        "s3.endpoint": args.s3_endpoint,
        "s3.path-style-access": "true",
        "s3.access-key-id": args.s3_access_key,
        "s3.secret-access-key": args.s3_secret_key,
        "client.region": args.s3_region,
    }


def create_table(args: argparse.Namespace) -> None:
    """The lab's table, made with Iceberg's Java API: Flink SQL cannot declare day(bid_time)."""
    jvm = get_gateway().jvm
    iceberg = jvm.org.apache.iceberg
    catalog = iceberg.rest.RESTCatalog()
    catalog.initialize(CATALOG, {"uri": args.catalog_url, "warehouse": args.warehouse, **s3_properties(args)})
    types = iceberg.types.Types
    fields = [
        types.NestedField.required(1, "order_id", types.StringType.get()),
        types.NestedField.optional(2, "item", types.StringType.get()),
        types.NestedField.optional(3, "price", types.DecimalType.of(10, 2)),
        types.NestedField.optional(4, "supplier", types.StringType.get()),
        types.NestedField.optional(5, "bid_time", types.TimestampType.withoutZone()),
    ]
    schema = iceberg.Schema(fields)  # the gateway passes a list as a java.util.List
    spec = iceberg.PartitionSpec.builderFor(schema).day("bid_time").build()
    identifier = iceberg.catalog.TableIdentifier.parse(f"{args.namespace}.{args.table}")  # of(...) is varargs
    if not catalog.tableExists(identifier):
        catalog.createTable(identifier, schema, spec, {"format-version": "2"})
    catalog.close()


SOURCE_COLUMNS = "order_id STRING NOT NULL, bid_time TIMESTAMP(3), price STRING, item STRING, supplier STRING"
COMMON_OPTIONS = ("bootstrap-servers", "topic", "registry-url", "report")


def arguments(description: str, *options: str) -> argparse.Namespace:
    """The options every peer job takes, and its own (all required)."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    for option in (*COMMON_OPTIONS, *options):
        parser.add_argument(f"--{option}", required=True)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument(
        "--checkpoint-ms", type=int, help="run unbounded, with a checkpoint (and its commits) this often"
    )
    return parser.parse_args()


def run(args: argparse.Namespace, statements: Callable[[TableEnvironment], str]) -> None:
    """Set up a streaming table environment with ``statements`` (which return the INSERT to run),
    run the INSERT to its end, and report the Flink job's net runtime."""
    started = time.monotonic()
    environment = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    environment.get_config().set("parallelism.default", str(args.parallelism))
    if args.checkpoint_ms:
        environment.get_config().set("execution.checkpointing.interval", f"{args.checkpoint_ms} ms")
    insert = statements(environment)
    set_up_s = time.monotonic() - started
    execution = environment.execute_sql(insert).get_job_client().get_job_execution_result().result()
    with open(args.report, "w") as report:
        json.dump(
            {
                "job_net_runtime_s": execution.get_net_runtime() / 1000,
                "set_up_s": round(set_up_s, 3),
                "duration_seconds": round(time.monotonic() - started, 3),
            },
            report,
        )


def orders_source(args: argparse.Namespace, group: str) -> dict[str, str]:
    """The orders topic read through the registry, from its start to its end when the job starts
    (unbounded with ``--checkpoint-ms``)."""
    return {
        "connector": "kafka",
        "topic": args.topic,
        "properties.bootstrap.servers": args.bootstrap_servers,
        "properties.group.id": group,
        "scan.startup.mode": "earliest-offset",
        **({} if args.checkpoint_ms else {"scan.bounded.mode": "latest-offset"}),
        "format": "avro-confluent",
        "avro-confluent.url": args.registry_url,
    }


def with_options(options: dict[str, str]) -> str:
    return ", ".join(f"'{key}' = '{value}'" for key, value in options.items())


def main() -> None:
    args = arguments(
        __doc__,
        "catalog-url",
        "warehouse",
        "s3-endpoint",
        "s3-access-key",
        "s3-secret-key",
        "s3-region",
        "namespace",
        "table",
    )

    def statements(environment: TableEnvironment) -> str:
        create_table(args)
        catalog = {
            "type": "iceberg",
            "catalog-type": "rest",
            "uri": args.catalog_url,
            "warehouse": args.warehouse,
            **s3_properties(args),
        }
        environment.execute_sql(f"CREATE CATALOG {CATALOG} WITH ({with_options(catalog)})")
        source = with_options(orders_source(args, group=f"flink-peer-{args.table}"))
        environment.execute_sql(f"CREATE TEMPORARY TABLE orders_source ({SOURCE_COLUMNS}) WITH ({source})")
        return f"""
            INSERT INTO {CATALOG}.`{args.namespace}`.`{args.table}`
            SELECT order_id, item, CAST(price AS DECIMAL(10, 2)), supplier, bid_time FROM orders_source"""

    run(args, statements)


if __name__ == "__main__":
    main()

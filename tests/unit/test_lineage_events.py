"""Lineage events built from the catalog: valid against the official schemas, and shaped like the asset graph."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import tomllib

from openlineage.client.event_v2 import RunState
from openlineage.client.serde import Serde

from lineage_assets.datasets import CHECKS, DATASETS, LAKEHOUSE_ORDERS, ORDERS, SUPPLIER_STATS
from lineage_assets.lineage import events
from lineage_assets.lineage.facets import StreamingProgressRunFacet
from lineage_assets.lineage.observed import as_designed
from lineage_assets.lineage.run_facts import (
    Assertion,
    DagsterRun,
    DatasetVersion,
    OffsetRange,
    OutputStatistics,
    RunFacts,
    SourceRead,
    WrittenFile,
    offset_ranges,
    snapshot_written,
    table_read,
)
from lineage_assets.lineage.transport import event_line
from lineage_assets.settings import PROJECT_ROOT, Settings
from tests.openlineage_schemas import validate_event

SETTINGS = Settings()
QUALITY = {
    "rows": 3,
    "bytes": 4096,
    "files": 2,  # a job's `quality` report entry (spark/support/reports.py)
    "columns": {"order_id": {"nulls": 0}, "price": {"nulls": 1, "min": 1.5, "max": 99.99}, "item": {}},
}
# Partition 1's records 10..39 read; partition 0 had none.
RANGES = offset_ranges("orders", {"orders": {"0": 7, "1": 10}}, {"orders": {"0": 7, "1": 40}})
WRITTEN = (OffsetRange(0, 3, 5),)
TABLE_READ = table_read(LAKEHOUSE_ORDERS, 8812, 0)
RUN = DagsterRun(
    run_id="6a1f0c9e-1111-4222-8333-944455556666",
    job_name="__ephemeral_asset_job__",
    started_at=dt.datetime(2026, 11, 21, 12, 0, tzinfo=dt.UTC),
)


def as_json(event) -> dict:
    """The event as the event log records it."""
    return json.loads(event_line(event))


READ = SourceRead(
    dataset="orders",
    subject="orders-value",
    offsets=RANGES,
    versions=(
        {
            "version": 1,
            "schema_id": 1,
            "records": 30,
            "readable": True,
            "problems": [],
            "fields": [["order_id", "string"]],
        },
        {
            "version": 2,
            "schema_id": 4,
            "records": 20,
            "readable": False,
            "problems": ["field supplier is missing (removed or renamed)"],
            "fields": [["order_id", "string"]],
        },
    ),
    assertions=(
        Assertion(
            "orders_schema_readable",
            "schema_compatible",
            False,
            "no record waits",
            expected="0",
            actual="20",
            blocking=True,
        ),
    ),
)


PRICE_IN_RANGE = Assertion(
    "orders_values_in_range",
    "range",
    False,
    "no row where price <= 0",
    column="price",
    expected="0",
    actual="2",
    sql="SELECT count_if(price <= 0) FROM orders",
)
ROWS_RECONCILE = Assertion(
    "orders_reconcile_with_topic", "row_count", True, "rows equal offsets", expected="7", actual="7"
)


def every_kind_of_event():
    try:
        raise ValueError("price 'x' is not a DECIMAL(10,2)")
    except ValueError as error:
        failure = error
    for dataset in DATASETS.values():
        yield events.asset_event(RunState.START, dataset, RUN, SETTINGS)
        yield events.asset_event(
            RunState.COMPLETE,
            dataset,
            RUN,
            SETTINGS,
            RunFacts(
                statistics=OutputStatistics(rows=10, bytes=2048, files=2),
                lifecycle="OVERWRITE",
                quality=QUALITY,
                version=DatasetVersion("4412", schema_id=1),
                reads=(READ, TABLE_READ),
                observation=as_designed(dataset),
                offsets=WRITTEN,
                files=(WrittenFile("part-00000-1.parquet", 2048),),
                partitions=("2026-11-20", "2026-11-21"),
            ),
        )
        yield events.asset_event(RunState.FAIL, dataset, RUN, SETTINGS, error=failure)
        yield events.asset_event(RunState.ABORT, dataset, RUN, SETTINGS)
    yield events.asset_event(
        RunState.RUNNING,
        LAKEHOUSE_ORDERS,
        RUN,
        SETTINGS,
        RunFacts(
            statistics=OutputStatistics(rows=5),
            version=DatasetVersion("4413", schema_id=1),
            quality=QUALITY,
        ),
        running_interval=30,
        progress=StreamingProgressRunFacet(processedRows=5, sourceOffsets={"orders": {"0": 5}}),
    )
    # A streaming file sink's metrics: the records written so far, no bytes or files.
    yield events.asset_event(
        RunState.RUNNING,
        DATASETS["orders_archive"],
        None,
        SETTINGS,
        RunFacts(quality={**QUALITY, "bytes": None, "files": None}),
        run_id=RUN.lineage_run_id,
        running_interval=30,
    )
    for check in CHECKS.values():
        yield events.check_event(RunState.START, check, RUN, SETTINGS)
        yield events.check_event(RunState.COMPLETE, check, RUN, SETTINGS, assertions=(PRICE_IN_RANGE, ROWS_RECONCILE))
        yield events.check_event(RunState.FAIL, check, RUN, SETTINGS, error=failure)
    yield events.dagster_run_event(RunState.START, RUN, SETTINGS)
    yield events.dagster_run_event(RunState.FAIL, RUN, SETTINGS, error_message="step failed")


def test_every_kind_of_event_validates_against_the_official_schemas():
    for event in every_kind_of_event():
        body = as_json(event)
        assert validate_event(body) == [], (body["eventType"], body["job"]["name"])


def test_the_event_log_records_what_openlineage_python_serializes():
    for event in every_kind_of_event():
        assert event_line(event) == Serde.to_json(event) + "\n"


def test_validation_names_what_is_wrong():
    body = as_json(events.asset_event(RunState.START, ORDERS, RUN, SETTINGS))
    body["run"]["runId"] = "not-a-uuid"
    body["job"]["facets"]["jobType"].pop("processingType")
    problems = validate_event(body)
    assert any("not-a-uuid" in p for p in problems)
    assert any(p.startswith("job.jobType") and "processingType" in p for p in problems)


def test_the_project_facets_are_checked_against_their_packaged_schemas():
    body = as_json(
        events.asset_event(
            RunState.RUNNING,
            LAKEHOUSE_ORDERS,
            RUN,
            SETTINGS,
            RunFacts(reads=(READ,)),
            running_interval=30,
            progress=StreamingProgressRunFacet(processedRows=5),
        )
    )
    body["run"]["facets"]["streamingProgress"]["processedRows"] = "five"
    body["inputs"][0]["inputFacets"]["schemaVersions"]["versions"][0].pop("readable")
    problems = validate_event(body)
    assert any(p.startswith("run.streamingProgress") and "'five' is not of type 'integer'" in p for p in problems)
    assert any(
        p.startswith("inputs:orders:io.schemaVersions") and "'readable' is a required property" in p for p in problems
    )
    body["run"]["facets"]["streamingProgress"]["_schemaURL"] = (
        "urn:lineage_assets:schema:StreamingProgressRunFacet:9.9.9"
    )
    assert any("no pinned schema for _schemaURL" in p for p in validate_event(body))


def test_a_schema_url_the_pinned_set_lacks_is_a_violation():
    """An event naming another version of a standard facet or of the core spec is not taken as valid
    by a schema of the same name: the pins are exactly what the events may name."""
    body = as_json(events.asset_event(RunState.START, ORDERS, RUN, SETTINGS))
    schema = body["outputs"][0]["facets"]["schema"]
    schema["_schemaURL"] = schema["_schemaURL"].replace("/facets/1-2-0/", "/facets/1-9-9/")
    assert validate_event(body) == [f"outputs:orders.schema: no pinned schema for _schemaURL {schema['_schemaURL']!r}"]
    body["schemaURL"] = body["schemaURL"].replace("/2-0-2/", "/2-0-9/")
    assert validate_event(body) == [f"event: no pinned schema for schemaURL {body['schemaURL']!r}"]


def test_run_ids_are_uuid7_stable_per_dagster_run_and_asset():
    first = events.asset_event(RunState.START, SUPPLIER_STATS, RUN, SETTINGS)
    again = events.asset_event(RunState.COMPLETE, SUPPLIER_STATS, RUN, SETTINGS)
    other_asset = events.asset_event(RunState.START, LAKEHOUSE_ORDERS, RUN, SETTINGS)
    assert first.run.runId == again.run.runId != other_asset.run.runId
    assert first.run.runId[14] == "7"  # version nibble
    parent = as_json(first)["run"]["facets"]["parent"]
    # The parent job is the same whatever Dagster job ran the asset, and the asset job's name is
    # already the one Marquez gives that parent's child: one Marquez job per asset.
    assert parent["run"]["runId"] == RUN.lineage_run_id and parent["job"]["name"] == "dagster"
    assert as_json(first)["job"]["name"] == f"{parent['job']['name']}.{SUPPLIER_STATS.job.name}"
    other_job = DagsterRun(run_id=RUN.run_id, job_name="supplier_stats_job", started_at=RUN.started_at)
    assert (
        as_json(events.asset_event(RunState.START, SUPPLIER_STATS, other_job, SETTINGS))["job"] == as_json(first)["job"]
    )


def test_inputs_and_outputs_are_the_asset_graph_edges_named_by_the_catalog():
    assert (
        "columnLineage"
        not in as_json(events.asset_event(RunState.START, SUPPLIER_STATS, RUN, SETTINGS))["outputs"][0]["facets"]
    )
    # Column lineage only as a run observed it (here: as the catalog expects it).
    body = as_json(
        events.asset_event(
            RunState.COMPLETE,
            SUPPLIER_STATS,
            RUN,
            SETTINGS,
            RunFacts(observation=as_designed(SUPPLIER_STATS)),
        )
    )
    assert [(d["namespace"], d["name"]) for d in body["inputs"]] == [("s3://warehouse", "default/orders")]
    output = body["outputs"][0]
    assert (output["namespace"], output["name"]) == ("s3://warehouse", "default/supplier_stats")
    assert output["facets"]["symlinks"]["identifiers"] == [
        {"namespace": SETTINGS.iceberg_catalog_url, "name": "default.supplier_stats", "type": "TABLE"}
    ]
    total_price = output["facets"]["columnLineage"]["fields"]["total_price"]["inputFields"]
    # One input field per dataset field, with each of its transformations.
    assert {(f["name"], f["field"], tuple(t["subtype"] for t in f["transformations"])) for f in total_price} == {
        ("default/orders", "price", ("AGGREGATION",)),
        ("default/orders", "bid_time", ("FILTER", "GROUP_BY", "GROUP_BY")),  # grouped by its date and its hour
        ("default/orders", "supplier", ("GROUP_BY",)),
    }
    # The deprecated per-column spelling too: the one Marquez 0.51 stores.
    fields = output["facets"]["columnLineage"]["fields"]
    assert fields["total_price"]["transformationType"] == "DIRECT/AGGREGATION, INDIRECT/FILTER, INDIRECT/GROUP_BY"
    assert fields["total_price"]["transformationDescription"].startswith(
        "cast(sum(lakehouse/orders.price) as decimal(10,2)); rows where (to_date(lakehouse/orders.bid_time"
    )
    assert body["job"]["facets"]["jobType"]["processingType"] == "BATCH"
    ingestion = as_json(
        events.asset_event(
            RunState.COMPLETE,
            LAKEHOUSE_ORDERS,
            RUN,
            SETTINGS,
            RunFacts(observation=as_designed(LAKEHOUSE_ORDERS)),
        )
    )
    assert ingestion["job"]["name"] == "dagster.iceberg-ingestion"
    assert ingestion["job"]["facets"]["jobType"]["processingType"] == "STREAMING"
    price = ingestion["outputs"][0]["facets"]["columnLineage"]["fields"]["price"]["inputFields"]
    assert next(field for field in price if field["field"] == "price") == {
        "namespace": "kafka://127.0.0.1:19092",
        "name": "orders",
        "field": "price",
        "transformations": [
            {
                "type": "DIRECT",
                "subtype": "TRANSFORMATION",
                "description": "try_cast(orders.price as decimal(10,2))",
                "masking": False,
            },
            {
                "type": "INDIRECT",
                "subtype": "FILTER",
                "description": "rows where isnull(dead_letter_reason)",
                "masking": False,
            },
        ],
    }


def test_failure_carries_the_exception_and_its_stack():
    try:
        raise RuntimeError("spark job exited with code 1")
    except RuntimeError as error:
        body = as_json(events.asset_event(RunState.FAIL, SUPPLIER_STATS, RUN, SETTINGS, error=error))
    facet = body["run"]["facets"]["errorMessage"]
    assert facet["message"] == "RuntimeError: spark job exited with code 1"
    assert "Traceback" in facet["stackTrace"] and facet["programmingLanguage"] == "PYTHON"


def test_an_outputs_quality_metrics_carry_the_jobs_numbers():
    body = as_json(events.asset_event(RunState.COMPLETE, LAKEHOUSE_ORDERS, RUN, SETTINGS, RunFacts(quality=QUALITY)))
    facet = body["outputs"][0]["facets"]["dataQualityMetrics"]
    assert facet["_schemaURL"].endswith("/DataQualityMetricsDatasetFacet.json#/$defs/DataQualityMetricsDatasetFacet")
    assert {k: v for k, v in facet.items() if not k.startswith("_")} == {
        "rowCount": 3,
        "bytes": 4096,
        "fileCount": 2,
        "columnMetrics": {
            "order_id": {"nullCount": 0},
            "price": {"nullCount": 1, "min": 1.5, "max": 99.99},
            "item": {},
        },
    }
    assert (
        "dataQualityMetrics"
        not in as_json(events.asset_event(RunState.COMPLETE, LAKEHOUSE_ORDERS, RUN, SETTINGS))["outputs"][0]["facets"]
    )


def test_a_table_version_names_its_snapshot_and_schema_and_a_read_names_every_version():
    body = as_json(
        events.asset_event(
            RunState.COMPLETE,
            LAKEHOUSE_ORDERS,
            RUN,
            SETTINGS,
            RunFacts(version=DatasetVersion("4412", schema_id=1), reads=(READ,)),
        )
    )
    version = body["outputs"][0]["facets"]["version"]
    assert (version["datasetVersion"], version["schemaId"]) == ("4412", 1)
    assert version["_schemaURL"].endswith("/DatasetVersionDatasetFacet.json#/$defs/DatasetVersionDatasetFacet")
    (orders,) = body["inputs"]
    assert orders["facets"]["version"]["datasetVersion"] == "orders-value:1"  # the newest readable version read
    assert [(v["version"], v["readable"]) for v in orders["inputFacets"]["schemaVersions"]["versions"]] == [
        (1, True),
        (2, False),
    ]
    (assertion,) = orders["inputFacets"]["dataQualityAssertions"]["assertions"]
    assert (assertion["success"], assertion["severity"], assertion["actual"]) == (False, "error", "20")


def test_a_check_evaluation_is_a_run_reading_the_dataset_it_checked_with_its_assertions_there():
    check = CHECKS["orders_values_in_range"]
    body = as_json(events.check_event(RunState.COMPLETE, check, RUN, SETTINGS, assertions=(PRICE_IN_RANGE,)))
    start = as_json(events.check_event(RunState.START, check, RUN, SETTINGS))
    assert (
        body["run"]["runId"] == start["run"]["runId"] == RUN.check_run_id(check) != RUN.asset_run_id(LAKEHOUSE_ORDERS)
    )
    assert body["job"]["name"] == "dagster.check.orders_values_in_range"  # a child of the Dagster run's job
    assert body["run"]["facets"]["parent"]["run"]["runId"] == RUN.lineage_run_id
    assert body["job"]["facets"]["jobType"]["jobType"] == "ASSET_CHECK"
    assert body["outputs"] == []
    (table,) = body["inputs"]
    assert (table["namespace"], table["name"]) == ("s3://warehouse", "default/orders")
    (assertion,) = table["inputFacets"]["dataQualityAssertions"]["assertions"]
    assert assertion == {
        "assertion": "range",
        "success": False,
        "column": "price",
        "severity": "warn",
        "name": "orders_values_in_range",
        "description": "no row where price <= 0",
        "expected": "0",
        "actual": "2",
        "content": "SELECT count_if(price <= 0) FROM orders",
        "contentType": "sql",
    }
    assert (
        "inputFacets" not in start["inputs"][0] or not start["inputs"][0]["inputFacets"]
    )  # the results come at the end


def test_an_integrations_custom_facet_is_held_to_the_spec_definition_it_names():
    """openlineage-spark's own run facets point at the core spec's RunFacet: the base facet rules."""
    body = as_json(events.asset_event(RunState.START, ORDERS, RUN, SETTINGS))
    body["run"]["facets"]["spark_properties"] = {
        "_producer": "https://github.com/OpenLineage/OpenLineage/tree/1.53.0/integration/spark",
        "_schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunFacet",
        "properties": {"spark.master": "local[2]"},
    }
    assert validate_event(body) == []
    del body["run"]["facets"]["spark_properties"]["_producer"]
    assert "run.spark_properties: '_producer' is a required property at []" in validate_event(body)


def test_a_run_names_the_offsets_it_read_and_wrote_the_snapshot_it_read_and_the_files_it_added():
    assert RANGES == (OffsetRange(1, 10, 40),)
    facts = RunFacts(reads=(READ, TABLE_READ), offsets=WRITTEN, files=(WrittenFile("day=1/part-0.parquet", 512),))
    archive = as_json(events.asset_event(RunState.COMPLETE, DATASETS["orders_archive"], RUN, SETTINGS, facts))
    (orders,) = archive["inputs"]
    assert orders["inputFacets"]["kafkaOffsets"]["partitions"] == [{"partition": 1, "start": 10, "end": 40}]
    assert archive["outputs"][0]["outputFacets"]["filesWritten"]["files"] == [
        {"path": "day=1/part-0.parquet", "size": 512}
    ]
    stats = as_json(
        events.asset_event(
            RunState.COMPLETE, SUPPLIER_STATS, RUN, SETTINGS, dataclasses.replace(facts, partitions=("2026-11-21",))
        )
    )
    assert stats["outputs"][0]["outputFacets"]["partitionsWritten"]["partitions"] == ["2026-11-21"]
    (table,) = stats["inputs"]
    assert (table["facets"]["version"]["datasetVersion"], table["facets"]["version"]["schemaId"]) == ("8812", 0)
    assert table["inputFacets"]["icebergSnapshot"] == {**table["inputFacets"]["icebergSnapshot"], "snapshotId": 8812}
    live = as_json(events.asset_event(RunState.COMPLETE, DATASETS["supplier_stats_live"], RUN, SETTINGS, facts))
    assert live["outputs"][0]["outputFacets"]["kafkaOffsets"] == {
        **live["outputs"][0]["outputFacets"]["kafkaOffsets"],
        "topic": "supplier-stats",
        "partitions": [{"partition": 0, "start": 3, "end": 5}],
    }
    for body in (archive, stats, live):
        assert validate_event(body) == []
    orders["inputFacets"]["kafkaOffsets"]["partitions"][0].pop("end")
    archive["outputs"][0]["outputFacets"]["filesWritten"]["files"][0]["size"] = -1
    problems = validate_event(archive)
    assert any("kafkaOffsets" in p and "'end' is a required property" in p for p in problems), problems
    assert any("filesWritten" in p and "-1" in p for p in problems), problems


def test_a_table_written_names_its_snapshot_and_the_one_the_run_built_on():
    def written(version: DatasetVersion) -> dict:
        body = as_json(events.asset_event(RunState.COMPLETE, SUPPLIER_STATS, RUN, SETTINGS, RunFacts(version=version)))
        assert validate_event(body) == []
        return body

    body = written(snapshot_written(9001, 2, 9000))
    assert body["outputs"][0]["outputFacets"]["icebergSnapshot"] == {
        **body["outputs"][0]["outputFacets"]["icebergSnapshot"],
        "snapshotId": 9001,
        "parentSnapshotId": 9000,
    }
    began = written(snapshot_written(9001, 2, None))["outputs"][0]["outputFacets"]["icebergSnapshot"]
    assert began.get("parentSnapshotId") is None and began["snapshotId"] == 9001
    assert snapshot_written(None, None, None) is None  # a table with no snapshot yet
    body["outputs"][0]["outputFacets"]["icebergSnapshot"]["parentSnapshotId"] = "9000"
    assert any("icebergSnapshot" in p and "'9000'" in p for p in validate_event(body))


def test_every_event_names_the_release_that_produced_it():
    declared = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]["version"]
    dagster_run = DagsterRun(run_id="release", job_name="__ephemeral_asset_job__", started_at=dt.datetime.now(dt.UTC))
    event = json.loads(
        event_line(events.check_event(RunState.COMPLETE, next(iter(CHECKS.values())), dagster_run, Settings()))
    )
    assert event["producer"] == f"urn:lineage_assets:{declared}"

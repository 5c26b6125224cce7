"""Reading events into the lineage graph, and drawing it (pure logic, on hand-made events)."""

from __future__ import annotations

from lineage_assets.lineage.graph import LineageGraph
from lineage_assets.lineage.page import render

ORDERS = {"namespace": "kafka://broker:9092", "name": "orders"}
TABLE = {"namespace": "s3://warehouse", "name": "default/orders"}


def event(job, run, state, second, inputs=(), outputs=(), parent=None, schema=None):
    facets = {"parent": {"run": {"runId": parent[1]}, "job": {"namespace": "ns", "name": parent[0]}}} if parent else {}
    outputs = [
        {**d, "facets": {"schema": {"fields": [{"name": n, "type": t} for n, t in schema.items()]}}} if schema else d
        for d in outputs
    ]
    return {
        "eventType": state,
        "eventTime": f"2026-11-22T10:00:{second:02d}.000Z",
        "run": {"runId": run, "facets": facets},
        "job": {"namespace": "ns", "name": job},
        "inputs": list(inputs),
        "outputs": outputs,
    }


def test_a_run_that_ended_stays_ended_when_a_running_event_arrives_late():
    graph = LineageGraph.from_events(
        [event("ingest", "r1", "START", 1), event("ingest", "r1", "COMPLETE", 5), event("ingest", "r1", "RUNNING", 3)]
    )
    assert graph.jobs["ns/ingest"].state == "COMPLETE"


def test_a_new_run_after_a_failed_one_shows_running_until_it_ends():
    graph = LineageGraph.from_events(
        [event("ingest", "r1", "START", 1), event("ingest", "r1", "FAIL", 2), event("ingest", "r2", "START", 3)]
    )
    assert graph.jobs["ns/ingest"].state == "RUNNING"
    assert graph.jobs["ns/ingest"].runs == {"r1", "r2"}


def test_spark_jobs_belong_to_the_nearest_ancestor_that_has_datasets():
    graph = LineageGraph.from_events(
        [
            event("dagster_run", "d1", "START", 0),
            event("ingest", "a1", "START", 1, [ORDERS], [TABLE], parent=("dagster_run", "d1")),
            event("ingest_spark", "s1", "START", 2, parent=("ingest", "a1")),
            event("ingest_spark.append", "s2", "COMPLETE", 3, [ORDERS], [TABLE], parent=("ingest_spark", "s1")),
        ]
    )
    assert graph.owner_of("ns/ingest_spark.append") == "ns/ingest"
    assert graph.owner_of("ns/ingest_spark") == "ns/ingest"
    assert graph.owner_of("ns/ingest") is None


def test_columns_come_from_the_trusted_jobs_when_they_report_a_schema():
    graph = LineageGraph.from_events(
        [
            event(
                "ingest", "a1", "COMPLETE", 1, outputs=[TABLE], schema={"order_id": "string", "price": "decimal(10,2)"}
            ),
            event("spark.snapshots", "s1", "COMPLETE", 2, outputs=[TABLE], schema={"snapshot_id": "long"}),
        ]
    )
    node = (TABLE["namespace"], TABLE["name"])
    assert graph.columns(node, {"ns/ingest"}) == {"order_id": "string", "price": "decimal(10,2)"}
    assert graph.columns(node, set()) == {"order_id": "string", "price": "decimal(10,2)", "snapshot_id": "long"}


def test_the_page_marks_a_dataset_only_spark_named_and_skips_reading_back_the_output():
    misnamed = {"namespace": "hive://metastore:9083", "name": "default.orders"}
    graph = LineageGraph.from_events(
        [
            event("ingest", "a1", "COMPLETE", 1, [ORDERS], [TABLE]),
            event("ingest_spark", "s1", "COMPLETE", 2, [ORDERS, TABLE], [misnamed], parent=("ingest", "a1")),
        ]
    )
    html = render(graph, {(TABLE["namespace"], TABLE["name"]): "lakehouse/orders"}, "t", "s").html
    assert html.count('class="edge nested-only"') == 1  # ingest -> the misnamed table, dashed
    assert "dataset:s3://warehouse:default/orders → ns/ingest" not in html  # reading back its own output
    assert 'data-id="dataset:s3://warehouse:default/orders"' in html and ">lakehouse/orders<" in html

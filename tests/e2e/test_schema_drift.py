"""The essay's incident on the local stack: a producer registers a version of `orders-value` that
the pipeline cannot read and sends records with it, mixed with good ones.

Its records must go to the dead-letter topic (never cast into `lakehouse/orders`), the blocking
check must hold `supplier_stats` back for the day, the lineage must show both versions and the
failed assertion; once the pipeline is taught the version (an alias in the catalog's reader schema,
as a developer would add it) and the dead letters are replayed, every record is in the table
exactly once and the day is rebuilt. A compatible version (an added optional field), sent meanwhile,
flows through with nothing dead-lettered. Expected values are computed here from the generated records.

Runs on its own topics, Iceberg namespace, state folder and lineage namespace, beside the other
end-to-end tests on the same stack.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import datetime as dt
import io
import json
from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal

import dagster as dg
import fastavro
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient

from lineage_assets import datasets
from lineage_assets.datasets import LAKEHOUSE_ORDERS, ORDERS_AVRO_SCHEMA, iceberg_table_name, with_aliases
from lineage_assets.dead_letters import replay
from lineage_assets.demo import DRIFTED_ORDERS_SCHEMA, PipelineRun, as_drifted, run_pipeline
from lineage_assets.generator import GeneratorConfig, generate_orders, produce_orders
from lineage_assets.lineage.emitter import emitter_for
from lineage_assets.lineage.marquez import MarquezApi
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.spark_conf import committed_table
from lineage_assets.testing import pipeline_of_its_own
from tests.e2e.test_pipeline import consume_all
from tests.openlineage_schemas import validate_event

DAY = dt.date(2026, 11, 19)
START = dt.datetime(2026, 11, 19, 10, 0, tzinfo=dt.UTC)
BEFORE = list(generate_orders(GeneratorConfig(count=60, seed=21, start=START)))
GOOD_DURING = list(generate_orders(GeneratorConfig(count=30, seed=22, start=START + dt.timedelta(minutes=5))))
DRIFTED = list(generate_orders(GeneratorConfig(count=20, seed=23, start=START + dt.timedelta(minutes=5, seconds=10))))
COMPATIBLE = list(generate_orders(GeneratorConfig(count=10, seed=24, start=START + dt.timedelta(minutes=8))))


def added_currency() -> dict:
    schema = copy.deepcopy(ORDERS_AVRO_SCHEMA)
    schema["fields"].append({"name": "currency", "type": ["null", "string"], "default": None})
    return schema


def taught_reader() -> dict:
    """The catalog's reader schema after a developer taught it the rename."""
    return with_aliases(ORDERS_AVRO_SCHEMA, supplier=("vendor",))


def produce(settings, orders, schema: dict = ORDERS_AVRO_SCHEMA) -> None:
    """As another team's producer: its own schema, registered on first use (as its serializer does by default)."""
    produce_orders(
        orders,
        settings,
        value_schema=json.dumps(schema),
    )


def expected_day_stats(orders) -> dict:
    stats = defaultdict(lambda: [Decimal("0"), 0])
    for order in orders:
        cell = stats[(order.order["supplier"], order.order["bid_time"].hour)]
        cell[0] += Decimal(order.order["price"])
        cell[1] += 1
    return {key: tuple(value) for key, value in stats.items()}


@dataclass
class Incident:
    before: PipelineRun
    drift: PipelineRun
    stats_after_drift: dict
    dead_letters: list
    rows_after_drift: list
    replay: object
    after_replay: PipelineRun
    rows_after_replay: list
    dead_letters_after_replay: list
    archive: list


@pytest.fixture(scope="module")
def drift_settings(settings):
    return pipeline_of_its_own(settings, "drift")


def day_stats(spark, settings) -> dict:
    rows = committed_table(spark, iceberg_table_name(settings, "supplier_stats")).where(f"bid_date = '{DAY}'").collect()
    return {(r.supplier, r.bid_hour): (r.total_price, r.total_count) for r in rows}


def table_rows(spark, settings) -> list:
    return committed_table(spark, iceberg_table_name(settings, "orders")).collect()


@pytest.fixture(scope="module")
def incident(stack, drift_settings, spark) -> Incident:
    instance = (
        dg.DagsterInstance.ephemeral()
    )  # its own asset history: the other end-to-end tests materialize the same keys
    settings = drift_settings
    environment = SettingsResource.of(settings)
    before = run_pipeline(environment, instance, {"count": len(BEFORE), "seed": 21, "start": START.isoformat()})

    produce(settings, GOOD_DURING)
    produce(settings, [as_drifted(o) for o in DRIFTED], DRIFTED_ORDERS_SCHEMA)
    drift = run_pipeline(environment, instance, None)
    stats_after_drift = day_stats(spark, settings)
    dead_letters = consume_all(settings, settings.dead_letter_topic)
    rows_after_drift = table_rows(spark, settings)

    with pytest.MonkeyPatch.context() as patch:  # the developer's change to datasets.py
        patch.setattr(datasets, "ORDERS_READER_SCHEMA", taught_reader())
        replayed = replay(settings, datasets.orders_reader_schema_json(), progress=print)
        produce(
            settings,
            [dataclasses.replace(o, order={**o.order, "currency": "EUR"}) for o in COMPATIBLE],
            added_currency(),
        )
        after_replay = run_pipeline(environment, instance, None)
        rows_after_replay = table_rows(spark, settings)
    dead_letters_after_replay = consume_all(settings, settings.dead_letter_topic)
    archive = spark.read.json(f"s3://{settings.archive_bucket}/{settings.archive_prefix}").collect()
    return Incident(
        before,
        drift,
        stats_after_drift,
        dead_letters,
        rows_after_drift,
        replayed,
        after_replay,
        rows_after_replay,
        dead_letters_after_replay,
        archive,
    )


def test_every_drifted_record_is_dead_lettered_with_its_reason_and_version(incident):
    letters = {m.key().decode(): json.loads(m.value()) for m in incident.dead_letters}
    assert set(letters) == {o.key for o in DRIFTED}
    for letter in letters.values():
        assert letter["reason"] == (
            "schema_incompatible: drift-orders-value version 2 (id "
            f"{letter['schema_id']}): field supplier is missing (removed or renamed)"
        )
        assert letter["schema_version"] == 2
    assert incident.drift.dead_letters == len(DRIFTED)


def test_the_table_holds_exactly_the_good_records_while_the_drift_is_stopped(incident):
    assert sorted(r.order_id for r in incident.rows_after_drift) == sorted(o.key for o in BEFORE + GOOD_DURING)


def test_the_blocking_check_fails_and_supplier_stats_keeps_its_value_before_the_drift(incident):
    assert incident.before.checks["orders_schema_readable"] and incident.before.days == [str(DAY)]
    assert incident.drift.checks["orders_schema_readable"] is False
    # The ingestion's other checks wait on its blocking one: skipped, and said so.
    assert incident.drift.checks["orders_reconcile_with_topic"] is None
    assert incident.drift.checks["orders_values_in_range"] is None
    assert (incident.drift.days, incident.drift.held_back, incident.drift.outstanding) == ([], [str(DAY)], len(DRIFTED))
    assert incident.stats_after_drift == expected_day_stats(BEFORE)


def test_the_lineage_shows_both_versions_and_the_failed_assertion(incident, drift_settings):
    emitter = emitter_for(drift_settings)
    ingestion = [
        e
        for e in emitter.events()
        if e["job"]["name"] == LAKEHOUSE_ORDERS.job.lineage_name and e["eventType"] == "COMPLETE"
    ]
    before, drift, replayed = ingestion[0], ingestion[1], ingestion[2]

    def read(event) -> dict:
        (orders,) = event["inputs"]
        return orders

    assert read(before)["facets"]["version"]["datasetVersion"] == "drift-orders-value:1"
    versions = read(drift)["inputFacets"]["schemaVersions"]["versions"]
    assert [(v["version"], v["records"], v["readable"]) for v in versions] == [
        (1, len(GOOD_DURING), True),
        (2, len(DRIFTED), False),
    ]
    assert versions[1]["problems"] == ["field supplier is missing (removed or renamed)"]
    (assertion,) = read(drift)["inputFacets"]["dataQualityAssertions"]["assertions"]
    assert (
        assertion["name"],
        assertion["assertion"],
        assertion["success"],
        assertion["actual"],
        assertion["severity"],
    ) == ("orders_schema_readable", "schema_compatible", False, str(len(DRIFTED)), "error")
    # The replayed records of the taught version, and the compatible version's sent meanwhile.
    assert [
        (v["version"], v["records"], v["readable"]) for v in read(replayed)["inputFacets"]["schemaVersions"]["versions"]
    ] == [(2, len(DRIFTED), True), (3, len(COMPATIBLE), True)]
    assert read(replayed)["inputFacets"]["dataQualityAssertions"]["assertions"][0]["success"] is True
    for event in (before, drift, replayed):
        assert validate_event(event) == []

    # As Marquez stored the drift run's events.
    assert emitter.flush(timeout=90)
    stored = [
        e
        for e in MarquezApi.of(drift_settings).events(limit=1000)
        if e["run"]["runId"] == drift["run"]["runId"] and e["eventType"] == "COMPLETE"
    ]
    assert [read(e)["inputFacets"]["dataQualityAssertions"]["assertions"][0]["success"] for e in stored] == [False]
    assert [v["version"] for v in read(stored[0])["inputFacets"]["schemaVersions"]["versions"]] == [1, 2]


def test_taught_and_replayed_every_record_is_in_the_table_exactly_once(incident, drift_settings):
    assert incident.replay.replayed == len(DRIFTED) and incident.replay.stopped_at is None
    expected = {o.key: o.order["supplier"] for o in BEFORE + GOOD_DURING + DRIFTED + COMPATIBLE}
    rows = incident.rows_after_replay
    assert len(rows) == len(expected) and {r.order_id: r.supplier for r in rows} == expected
    assert incident.after_replay.checks["orders_schema_readable"]
    assert incident.after_replay.days == [str(DAY)] and incident.after_replay.held_back == []
    assert incident.after_replay.supplier_totals[str(DAY)]  # rebuilt
    assert incident.after_replay.checks["orders_reconcile_with_topic"]


def test_a_compatible_version_flows_through_and_the_archive_keeps_its_new_field(incident, drift_settings, spark):
    assert len(incident.dead_letters_after_replay) == len(incident.dead_letters)  # nothing new dead-lettered
    expected = expected_day_stats(BEFORE + GOOD_DURING + DRIFTED + COMPATIBLE)
    assert day_stats(spark, drift_settings) == expected

    registry = SchemaRegistryClient({"url": drift_settings.schema_registry_url})
    compatible_keys = {o.key for o in COMPATIBLE}
    archived = [row for row in incident.archive if row.key in compatible_keys]
    assert len(archived) == len(COMPATIBLE)
    for row in archived:
        writer = fastavro.parse_schema(json.loads(registry.get_schema(row.schema_id).schema_str))
        value = base64.b64decode(row.value_base64)
        assert fastavro.schemaless_reader(io.BytesIO(value[5:]), writer)["currency"] == "EUR"

    events = emitter_for(drift_settings).events()
    last = [
        e for e in events if e["job"]["name"] == LAKEHOUSE_ORDERS.job.lineage_name and e["eventType"] == "COMPLETE"
    ][-1]
    (orders,) = last["inputs"]
    assert orders["facets"]["version"]["datasetVersion"] == "drift-orders-value:3"
    assert "currency" in {f["name"] for f in orders["facets"]["schema"]["fields"]}

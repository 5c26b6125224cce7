"""A writer version judged against what the pipeline reads (the catalog's reader schema)."""

from __future__ import annotations

import copy

import pytest

from lineage_assets.datasets import ORDERS_AVRO_SCHEMA, with_aliases
from lineage_assets.source_schemas import describe, judge


def changed(field: str, **attributes) -> dict:
    schema = copy.deepcopy(ORDERS_AVRO_SCHEMA)
    next(f for f in schema["fields"] if f["name"] == field).update(attributes)
    return schema


def without(field: str) -> dict:
    schema = copy.deepcopy(ORDERS_AVRO_SCHEMA)
    schema["fields"] = [f for f in schema["fields"] if f["name"] != field]
    return schema


def test_the_reader_reads_its_own_schema():
    assert judge(ORDERS_AVRO_SCHEMA, ORDERS_AVRO_SCHEMA) == ()


def test_an_added_optional_field_is_readable():
    added = copy.deepcopy(ORDERS_AVRO_SCHEMA)
    added["fields"].append({"name": "currency", "type": ["null", "string"], "default": None})
    assert judge(ORDERS_AVRO_SCHEMA, added) == ()


@pytest.mark.parametrize(
    "writer, problem",
    [
        (changed("price", type=["null", "long"]), "price is long, the pipeline reads string"),
        (changed("price", type=["null", "double"]), "price is double, the pipeline reads string"),
        (
            changed("price", type={"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 4}),
            "price is decimal(12,4), the pipeline reads string",
        ),
        (
            changed("bid_time", type=["null", {"type": "long", "logicalType": "timestamp-micros"}]),
            "bid_time is timestamp-micros, the pipeline reads timestamp-millis",
        ),
        (without("supplier"), "field supplier is missing (removed or renamed)"),
        (changed("supplier", name="vendor"), "field supplier is missing (removed or renamed)"),
        (changed("order_id", type=["null", "string"]), "order_id may be null, the pipeline requires it"),
    ],
)
def test_a_change_to_a_field_the_pipeline_reads_is_not_readable(writer, problem):
    assert judge(ORDERS_AVRO_SCHEMA, writer) == (problem,)


def test_a_renamed_record_is_not_readable():
    renamed = {**ORDERS_AVRO_SCHEMA, "name": "Purchase"}
    assert judge(ORDERS_AVRO_SCHEMA, renamed) == ("record 'Purchase' is not 'Order'",)


def test_an_alias_on_the_reader_teaches_it_a_rename():
    taught = with_aliases(ORDERS_AVRO_SCHEMA, supplier=("vendor",))
    assert judge(taught, changed("supplier", name="vendor")) == ()
    assert ORDERS_AVRO_SCHEMA["fields"][4].get("aliases") is None  # the catalog's schema is left as it was
    with pytest.raises(ValueError, match="Order has no field vendr"):
        with_aliases(ORDERS_AVRO_SCHEMA, vendr=("x",))


def test_types_are_described_in_a_few_words():
    assert describe(["null", {"type": "long", "logicalType": "timestamp-millis"}]) == "timestamp-millis | null"
    assert describe({"type": "array", "items": "string"}) == "array<string>"

"""Unit-test helpers: no servers."""

from __future__ import annotations

import io
import struct

import fastavro


def confluent_avro(schema: dict, record: dict, schema_id: int) -> bytes:
    """A value in the Confluent wire format: magic byte 0, big-endian schema id, Avro body."""
    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema(schema), record)
    return b"\x00" + struct.pack(">I", schema_id) + body.getvalue()


def renamed_field(schema: dict, old: str, new: str) -> dict:
    """A producer's next version of ``schema`` in which field ``old`` is called ``new``."""
    return {**schema, "fields": [{**f, "name": new} if f["name"] == old else f for f in schema["fields"]]}

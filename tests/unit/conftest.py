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

"""Which registered versions of a topic's value schema the pipeline can read.

A registry's compatibility rules judge a new version against the older *versions*; this judges it
against what the pipeline *reads* (the reader schema the catalog declares). A writer version is
readable when every field of the reader is in it, by name or by one of the reader field's Avro
aliases, with the same type (logical type, precision and scale included), and nullable only where
the reader takes null. Fields the writer adds are dropped on reading (Avro schema resolution), so
adding an optional field is readable; removing or renaming a field the pipeline reads, changing
its type, or making a required field nullable is not. Records of an unreadable version are never
cast into the pipeline's columns: they go to the dead-letter topic with reason
``schema_incompatible`` and their version, to be replayed once the pipeline is taught the version
(for a renamed field: an alias on the reader's field in ``datasets.py``).

No Spark, no Dagster: the Spark drivers use it to choose how to decode each record, the
dead-letter replay to know what it may replay, the lineage to report versions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

SCHEMA_INCOMPATIBLE = "schema_incompatible"  # the dead-letter reason (and its prefix) of an unreadable version


def value_subject(topic: str) -> str:
    """The registry subject of a topic's values (the Confluent TopicNameStrategy)."""
    return f"{topic}-value"


def dead_letter_topic_of(topic: str) -> str:
    """Where a job reading ``topic`` sends the records it cannot read, for a topic whose dead-letter
    topic is no setting of its own (the orders topic's is ``dead_letter_topic``)."""
    return f"{topic}-dlq"


@dataclass(frozen=True)
class WriterVersion:
    """One registered version of a subject, and what the pipeline's reader makes of it."""

    subject: str
    version: int
    schema_id: int
    schema: str  # the writer's Avro schema, JSON
    problems: tuple[str, ...]  # why the reader cannot read it; empty = readable

    @property
    def readable(self) -> bool:
        return not self.problems

    @property
    def label(self) -> str:
        return f"{self.subject} version {self.version} (id {self.schema_id})"

    @property
    def dead_letter_reason(self) -> str:
        return f"{SCHEMA_INCOMPATIBLE}: {self.label}: {'; '.join(self.problems)}"

    def fields(self) -> list[tuple[str, str]]:
        """(name, type) of each field of the writer's record; a type as ``describe`` spells it, less
        ``null`` (as the catalog spells its columns)."""
        return [(f["name"], _value_type(f["type"])) for f in json.loads(self.schema)["fields"]]


def _branches(avro_type) -> tuple[bool, list]:
    """(nullable, the non-null branches) of a field type."""
    branches = avro_type if isinstance(avro_type, list) else [avro_type]
    return "null" in branches, [b for b in branches if b != "null"]


def _one(avro_type) -> str:
    if isinstance(avro_type, str):
        return avro_type
    name = avro_type.get("logicalType") or avro_type["type"]
    if name == "decimal":
        return f"decimal({avro_type.get('precision')},{avro_type.get('scale', 0)})"
    if avro_type["type"] in ("record", "enum", "fixed"):
        return f"{avro_type['type']} {avro_type.get('name')}"
    if avro_type["type"] in ("array", "map"):
        return f"{avro_type['type']}<{describe(avro_type.get('items') or avro_type.get('values'))}>"
    return name if isinstance(name, str) else describe(name)


def _value_type(avro_type) -> str:
    return " | ".join(map(_one, _branches(avro_type)[1]))


def describe(avro_type) -> str:
    """A field type in a few words: ``string``, ``timestamp-millis``, ``decimal(10,2)``, ``long | null``."""
    nullable, branches = _branches(avro_type)
    return " | ".join([_one(b) for b in branches] + (["null"] if nullable else []))


def judge(reader: dict, writer: dict) -> tuple[str, ...]:
    """Why records written with ``writer`` cannot be read as ``reader``; empty when they can."""
    problems = []
    if writer.get("name") not in (reader.get("name"), *reader.get("aliases", ())):
        problems.append(f"record {writer.get('name')!r} is not {reader.get('name')!r}")
    written = {f["name"]: f for f in writer.get("fields", [])}
    for field in reader["fields"]:
        name = field["name"]
        found = next((written[n] for n in (name, *field.get("aliases", ())) if n in written), None)
        if found is None:
            problems.append(f"field {name} is missing (removed or renamed)")
            continue
        reader_nullable, reader_branches = _branches(field["type"])
        writer_nullable, writer_branches = _branches(found["type"])
        if sorted(map(_one, writer_branches)) != sorted(map(_one, reader_branches)):
            problems.append(f"{name} is {_value_type(found['type'])}, the pipeline reads {_value_type(field['type'])}")
        elif writer_nullable and not reader_nullable:
            problems.append(f"{name} may be null, the pipeline requires it")
    return tuple(problems)


class RegistryError(RuntimeError):
    """The schema registry could not be read; the message names its URL and the subject."""


def registered_versions(
    registry: Mapping[str, str], subject: str, reader_schema: str, client=None
) -> dict[int, WriterVersion]:
    """Every registered version of ``subject``, by schema id, judged against ``reader_schema``.

    A subject not registered yet has no versions (every record then carries an unknown id). Asked
    again with the same ``client`` (a ``SchemaRegistryClient``), only the list of versions is
    fetched: a registered version never changes, and the client keeps those it has read. ``registry``
    is the client's configuration (``connections.registry_conf``)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    registry_url = registry["url"]
    client = client or SchemaRegistryClient(dict(registry))
    reader = json.loads(reader_schema)
    try:
        numbers = client.get_versions(subject)
    except SchemaRegistryError as error:
        if error.http_status_code == 404:
            return {}
        raise RegistryError(f"schema registry at {registry_url}: versions of {subject}: {error}") from error
    except Exception as error:  # connection refused, timeout: say where
        raise RegistryError(f"schema registry at {registry_url}: versions of {subject}: {error}") from error
    versions = {}
    for number in numbers:
        registered = client.get_version(subject, number)
        schema = registered.schema.schema_str
        versions[registered.schema_id] = WriterVersion(
            subject=subject,
            version=registered.version,
            schema_id=registered.schema_id,
            schema=schema,
            problems=judge(reader, json.loads(schema)),
        )
    return versions

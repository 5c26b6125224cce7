"""How a dataset's columns are computed: the OpenLineage column transformations and sources, a job's
derivations as Spark's analyzed plan says them, and the designed lineage (each job's derivations as
reviewed, ``designed_lineage.json``), which the observed lineage is held against."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Transformation:
    """An OpenLineage column transformation (type DIRECT or INDIRECT, and its subtype); ``description``:
    the derivation it comes from as Spark's plan computes it (``Derivations``)."""

    type: str
    subtype: str
    description: str


@dataclass(frozen=True)
class ColumnSource:
    dataset: str  # a key of DATASETS
    column: str
    transformation: Transformation


InputField = tuple[str, str, str, str]  # (input dataset, its field, OpenLineage type, subtype)
RowInput = tuple[str, str, str, str]  # (input dataset, its field, INDIRECT subtype, what decides: a predicate, a key)


@dataclass(frozen=True)
class Derivations:
    """What a job computes its dataset from, as Spark's analyzed plan says: each written column's
    derivation (the expression with its literals, types and flags, down to the input fields, which
    are named ``dataset.field``) and the input fields it reads; the input fields that decide which rows
    there are (filters, joins, group keys), each with its predicate or key; and the schema written
    (observed; the catalog's ``columns`` are the one designed).
    An input that is no dataset of the catalog keeps the name the plan gives it."""

    columns: dict[str, str]
    inputs: dict[str, tuple[InputField, ...]]
    rows: tuple[RowInput, ...]
    schema: tuple[tuple[str, str], ...]
    locations: dict[str, str] = field(default_factory=dict)  # an input table's location, by its name in the plan

    def lineage(self) -> dict[str, tuple[ColumnSource, ...]]:
        """Per column its sources, each with one transformation described by its derivation: the
        column's own, or for the fields that decide the rows, the predicate or key."""
        rows = tuple(ColumnSource(d, f, Transformation("INDIRECT", subtype, how)) for d, f, subtype, how in self.rows)
        return {
            column: (
                *(
                    ColumnSource(d, f, Transformation(kind, subtype, text))
                    for d, f, kind, subtype in self.inputs[column]
                ),
                *rows,
            )
            for column, text in self.columns.items()
        }

    @property
    def datasets(self) -> tuple[str, ...]:
        """The input datasets, in first-seen order."""
        found = [d for inputs in self.inputs.values() for d, *_ in inputs] + [d for d, *_ in self.rows]
        return tuple(dict.fromkeys(found))

    def as_json(self) -> dict[str, Any]:
        """The designed lineage file's entry: a line per derivation, input and row, for review."""
        return {
            "columns": {
                column: {"derivation": text, "inputs": [f"{k}/{sub} {d}.{f}" for d, f, k, sub in self.inputs[column]]}
                for column, text in self.columns.items()
            },
            "rows": [f"{subtype} {d}.{f}: {how}" for d, f, subtype, how in self.rows],
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> Derivations:
        def field(text: str) -> tuple[str, str]:
            dataset, _, name = text.rpartition(".")
            return dataset, name

        def input_field(text: str) -> InputField:
            kind, _, source = text.partition(" ")
            return (*field(source), *kind.split("/", 1))  # type: ignore[return-value]  # two and two strings

        def row(text: str) -> RowInput:
            head, _, how = text.partition(": ")
            subtype, _, source = head.partition(" ")
            return (*field(source), subtype, how)

        columns = data["columns"]
        return Derivations(
            columns={column: entry["derivation"] for column, entry in columns.items()},
            inputs={column: tuple(input_field(i) for i in entry["inputs"]) for column, entry in columns.items()},
            rows=tuple(row(r) for r in data["rows"]),
            schema=(),  # the catalog's columns are the schema designed
        )


# The designed lineage: each job's derivations from its plan on empty inputs, written by
# `lineage-assets lineage accept` and reviewed as a diff of this file.
DESIGNED_LINEAGE = Path(__file__).with_name("designed_lineage.json")


@cache
def designed_lineage() -> dict[str, Derivations]:
    """The checked-in designed lineage, by dataset key."""
    if not DESIGNED_LINEAGE.exists():
        return {}
    return {key: Derivations.from_json(data) for key, data in json.loads(DESIGNED_LINEAGE.read_text()).items()}

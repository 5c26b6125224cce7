"""Observed column lineage: what a Spark job's plan says each written column came from
(``spark/lineage.py``), put in the catalog's terms and held against the catalog's expectation.

A job names its inputs as its plan does: a Kafka relation's columns (``key``, ``value``, a field read
from the value through ``from_avro`` as ``value.<field>``, the record's metadata) or a table's. Here
they become the catalog's datasets and fields: a value field is that field of the topic, the value's
bytes used whole are every field of it, the key is the topic's ``record_key`` field, and a record's
metadata (topic, partition, offset, timestamp) is no field of the topic's schema.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lineage_assets.column_lineage import ColumnSource, Derivations, Transformation
from lineage_assets.datasets import DATASETS, Dataset, Identity, Kind, foreign_identity
from lineage_assets.settings import Settings

ColumnLineage = dict[str, tuple[ColumnSource, ...]]  # output column -> its inputs, each with one transformation
# (dataset key, field) -> {(type, subtype, how)}; how: the transformation's description, the derivation
# it comes from.
Kinds = dict[tuple[str, str], set[tuple[str, str, str]]]


class ObservationError(ValueError):
    """A job's observed lineage cannot be read, or names an input that is no dataset of the catalog."""


def _datasets_by_source(settings: Settings) -> dict[str, Dataset]:
    """The catalog's datasets by the names a Spark plan gives them: ``kafka:<topic>``, ``table:<name>``."""
    by_source = {}
    for dataset in DATASETS.values():
        identity = dataset.identity(settings)
        if dataset.kind == Kind.KAFKA:
            by_source[f"kafka:{identity.name}"] = dataset
        for symlink in identity.symlinks if dataset.kind == Kind.ICEBERG else ():
            by_source[f"table:{symlink.name}"] = dataset  # Spark names a catalog's table with or without the catalog
            by_source[f"table:{settings.catalog_name}.{symlink.name}"] = dataset
    return by_source


def _fields(dataset: Dataset, field: str) -> tuple[str, ...]:
    """The dataset's fields that a plan's input column is."""
    if dataset.kind != Kind.KAFKA:
        return (field,)
    if field.startswith("value."):
        return (field.removeprefix("value."),)
    if field == "value":  # the record's bytes as a whole
        return tuple(column.name for column in dataset.columns)
    if field == "key":
        return (dataset.record_key,) if dataset.record_key else ()
    return ()  # the record's metadata


# An input field in a derivation as ``spark/lineage.py`` writes it (``«source|column»``), a field of a
# decoded record after it.
_DECODED_FIELD = re.compile(r"decoded\(«([^|»]*)\|([^»]*)»\)\.(\w+)")
_TOKEN = re.compile(r"«([^|»]*)\|([^»]*)»")


def derivations_of(report: Mapping[str, Any], settings: Settings) -> Derivations:
    """A job report's ``column_lineage`` (``spark/lineage.report``) in the catalog's names: each input
    a catalog dataset's key and field (a Kafka value's field is that field of the topic), an input of
    no catalog dataset named as the plan names it. ``ObservationError`` when the plan could not be read."""
    by_source = _datasets_by_source(settings)
    if report.get("unresolved"):
        raise ObservationError(f"the plan cannot be read: {'; '.join(report['unresolved'])}")
    if "derivations" not in report:
        raise ObservationError("the job reported no derivations (a job of an earlier version)")

    def dataset_of(source: str) -> str:
        known = by_source.get(source)
        return known.key if known is not None else source

    def fields(entry: Mapping[str, Any]) -> tuple[str, ...]:
        known = by_source.get(entry["source"])
        return _fields(known, entry["field"]) if known is not None else (entry["field"],)

    def field_name(source: str, column: str) -> str:
        known = by_source.get(source)
        if known is not None and known.kind == Kind.KAFKA and column.startswith("value."):
            column = column.removeprefix("value.")
        return f"{dataset_of(source)}.{column}"

    def named(text: str) -> str:
        text = _DECODED_FIELD.sub(lambda m: field_name(m.group(1), f"{m.group(2)}.{m.group(3)}"), text)
        return _TOKEN.sub(lambda m: field_name(m.group(1), m.group(2)), text)

    inputs = {}
    for column, entries in report["columns"].items():
        found = {(dataset_of(e["source"]), name, e["type"], e["subtype"]) for e in entries for name in fields(e)}
        # A field the column is computed from is not listed again for choosing between its values.
        direct = {key[:2] for key in found if key[2] == "DIRECT"}
        inputs[column] = tuple(sorted(key for key in found if not (key[3] == "CONDITIONAL" and key[:2] in direct)))
    rows = {
        (dataset_of(e["source"]), name, e["subtype"], named(e["derivation"]))
        for e in report.get("dataset") or []
        for name in fields(e)
    }
    return Derivations(
        columns={column: named(text) for column, text in report["derivations"].items()},
        inputs=inputs,
        rows=tuple(sorted(rows)),
        schema=tuple((name, kind) for name, kind in report.get("schema") or []),
        locations=dict(report.get("locations") or {}),
    )


def undeclared_inputs(derivations: Derivations, dataset: Dataset) -> list[str]:
    """The inputs of ``derivations`` that are not the dataset's declared inputs (the asset graph's edges)."""
    return [source for source in derivations.datasets if source not in dataset.inputs]


@dataclass(frozen=True)
class Observation:
    """What one run's job observed of what it wrote, for its lineage run and its Dagster check: its
    derivations (None when it observed none: ``missing`` says why, unless it wrote nothing), per column
    the sources they make, and its inputs that are no dataset of the catalog, named as openlineage-spark
    names them (an input no name reaches, rows made in memory, is left out of the lineage, not of the gaps)."""

    derivations: Derivations | None = None
    column_lineage: ColumnLineage | None = None
    foreign: dict[str, Identity] = field(default_factory=dict)
    missing: str | None = None

    def gaps(self, dataset: Dataset) -> list[str]:
        """Where what ran differs from the designed lineage; nothing observed of a write is one."""
        if self.derivations is None:
            return [f"{dataset.key}: no column lineage observed: {self.missing}"] if self.missing else []
        return derivation_gaps(dataset, self.derivations)


def as_designed(dataset: Dataset) -> Observation:
    """An observation of exactly the designed lineage: what a design reports, and a run as designed."""
    return Observation(dataset.designed, dataset.expected_lineage)


def observe_run(report: Mapping[str, Any] | None, settings: Settings) -> Observation:
    """A job report's ``column_lineage`` (None: the run planned no write) as an ``Observation``."""
    if report is None:
        return Observation()
    try:
        derivations = derivations_of(report, settings)
    except ObservationError as error:
        return Observation(missing=str(error))
    foreign = {}
    for source in derivations.datasets:
        if source not in DATASETS and (
            identity := foreign_identity(source, derivations.locations.get(source), settings)
        ):
            foreign[source] = identity
    return Observation(derivations, derivations.lineage(), foreign)


def derivation_gaps(dataset: Dataset, observed: Derivations, observer: str = "Spark ran") -> list[str]:
    """Every difference between the dataset's designed derivations and ``observed``, each naming both
    texts: a column's derivation or its inputs, the fields and predicates that decide the rows, the
    written schema, and an input that is no declared input of the asset."""
    key, designed = dataset.key, dataset.designed
    found = [f"{key} reads {source}, which is no input of the asset" for source in undeclared_inputs(observed, dataset)]
    if designed is None:
        return [*found, f"{key} has no designed lineage (`lineage-assets lineage accept {key}`)"]
    for column in dict.fromkeys([*designed.columns, *observed.columns]):
        if column not in observed.columns:
            found.append(f"{key}.{column}: the catalog says {designed.columns[column]}, {observer} no such column")
        elif column not in designed.columns:
            found.append(f"{key}.{column}: the catalog has no such column, {observer} {observed.columns[column]}")
        else:
            if (catalog := designed.columns[column]) != (ran := observed.columns[column]):
                found.append(f"{key}.{column}: the catalog says {catalog}, {observer} {ran}")
            if designed.inputs[column] != observed.inputs[column]:
                found.append(
                    f"{key}.{column} reads: the catalog says {_inputs(designed.inputs[column])}, "
                    f"{observer} {_inputs(observed.inputs[column])}"
                )
    for row in sorted(set(designed.rows) - set(observed.rows)):
        found.append(f"rows of {key}: the catalog says {_row(row)}, {observer} without it")
    for row in sorted(set(observed.rows) - set(designed.rows)):
        found.append(f"rows of {key}: the catalog does not say {_row(row)}, {observer} it")
    if (columns := tuple((c.name, c.type) for c in dataset.columns)) != observed.schema:
        found.append(f"schema of {key}: the catalog says {_schema(columns)}, {observer} {_schema(observed.schema)}")
    return found


def _inputs(inputs: tuple[tuple[str, str, str, str], ...]) -> str:
    return ", ".join(f"{d}.{f} ({kind}/{subtype})" for d, f, kind, subtype in inputs) or "no input field"


def _row(row: tuple[str, str, str, str]) -> str:
    dataset, field, subtype, how = row
    return f"{dataset}.{field} {subtype}: {how}"


def _schema(schema: tuple[tuple[str, str], ...]) -> str:
    return "(" + ", ".join(f"{name} {kind}" for name, kind in schema) + ")"


def from_facet(
    facet: Mapping[str, Any], dataset: Dataset, settings: Settings, columns: Sequence[str] = ()
) -> ColumnLineage:
    """A ``columnLineage`` facet that openlineage-spark derived for ``dataset`` as the catalog's types:
    per written column (``columns``, and those the facet names) each input field with each of its
    transformations; the facet's dataset-wide inputs apply to every column."""
    by_node = {}
    for candidate in DATASETS.values():
        identity = candidate.identity(settings)
        by_node[identity.node] = candidate
        by_node.update({(symlink.namespace, symlink.name): candidate for symlink in identity.symlinks})
    unresolved = []

    def sources(field: Mapping[str, Any], column: str) -> list[ColumnSource]:
        upstream = by_node.get((field["namespace"], field["name"]))
        if upstream is None:
            unresolved.append(f"input {field['namespace']}:{field['name']} is no dataset of the catalog")
            return []
        return [
            ColumnSource(
                upstream.key,
                field["field"],
                Transformation(
                    t["type"], t.get("subtype") or "", t.get("description") or "in openlineage-spark's plan"
                ),
            )
            for t in field.get("transformations") or [{"type": "DIRECT", "subtype": "IDENTITY"}]
        ]

    shared = facet.get("dataset") or []
    fields = facet.get("fields") or {}
    lineage = {
        column: tuple(
            dict.fromkeys(
                source
                for field in [*(fields.get(column) or {}).get("inputFields", []), *shared]
                for source in sources(field, column)
            )
        )
        for column in dict.fromkeys([*columns, *fields])
    }
    if unresolved:
        raise ObservationError(
            f"openlineage-spark's lineage of {dataset.key} cannot be read: {'; '.join(dict.fromkeys(unresolved))}"
        )
    return lineage


def kinds_of(sources: tuple[ColumnSource, ...], described: bool = True) -> Kinds:
    """Per input field the kinds of its transformations; ``described``: with each one's description."""
    kinds: Kinds = {}
    for source in sources:
        t = source.transformation
        how = t.description if described else ""
        kinds.setdefault((source.dataset, source.column), set()).add((t.type, t.subtype, how))
    return kinds


def disagreements(ours: ColumnLineage, theirs: ColumnLineage) -> list[str]:
    """Where two observations of one write differ: per column and input field, each one's kinds (not
    their descriptions, which each observer words its own way)."""
    found = []
    for column in dict.fromkeys([*ours, *theirs]):
        mine, other = kinds_of(ours.get(column, ()), False), kinds_of(theirs.get(column, ()), False)
        for source in sorted(set(mine) | set(other)):
            if mine.get(source) != other.get(source):
                found.append(
                    f"{column} from {source[0]}.{source[1]}: {_spell(mine.get(source, set()))} "
                    f"against {_spell(other.get(source, set()))}"
                )
    return found


def _spell(kinds: set[tuple[str, str, str]]) -> str:
    return ", ".join(f"{kind}/{subtype}" + (f" ({how})" if how else "") for kind, subtype, how in sorted(kinds)) or (
        "nothing"
    )


@dataclass(frozen=True)
class Gap:
    """One difference between the catalog and what Spark ran, for one output column."""

    dataset: str
    column: str
    upstream: str | None  # "dataset.field"; None: the column as a whole
    catalog: str
    observed: str
    run: str | None

    def __str__(self) -> str:
        where = f" from {self.upstream}" if self.upstream else ""
        run = f" (run {self.run})" if self.run else ""
        return (
            f"column lineage of {self.dataset}.{self.column}{where}: "
            f"the catalog says {self.catalog}, Spark ran {self.observed}{run}"
        )


def gaps(
    dataset: Dataset,
    observed: Mapping[str, Kinds],
    run: str | None = None,
    merged: Mapping[str, set[str]] | None = None,
) -> list[Gap]:
    """Every difference between ``dataset``'s expected column lineage and ``observed`` (per column, each
    input field's kinds). ``merged``: each input of a column carries the column's merged kinds and
    descriptions (all Marquez 0.51 keeps of a hop; per column, the descriptions shown), so the column's
    kinds and descriptions are compared as a whole."""
    expected = {column: kinds_of(sources) for column, sources in dataset.expected_lineage.items()}
    found: list[Gap] = []
    order = [c.name for c in dataset.columns]
    for column in sorted(set(expected) | set(observed), key=lambda c: order.index(c) if c in order else len(order)):
        if column not in expected:
            inputs = ", ".join(f"{d}.{c}" for d, c in sorted(observed[column])) or "no input"
            found.append(Gap(dataset.key, column, None, "no such column", f"a column from {inputs}", run))
            continue
        want, got = expected[column], observed.get(column, {})  # a column of no input field has no lineage
        for source in sorted(set(want) | set(got)):
            upstream = f"{source[0]}.{source[1]}"
            if source not in got:
                found.append(
                    Gap(dataset.key, column, upstream, _spell(want[source]), "nothing (a missing source)", run)
                )
            elif source not in want:
                found.append(Gap(dataset.key, column, upstream, "nothing (an extra source)", _spell(got[source]), run))
            elif merged is None and want[source] != got[source]:
                found.append(Gap(dataset.key, column, upstream, _spell(want[source]), _spell(got[source]), run))
        if merged is not None and want and got:
            found.extend(_merged_gaps(dataset, column, want, got, merged.get(column, set()), run))
    return found


def _merged_gaps(dataset: Dataset, column: str, want: Kinds, got: Kinds, shown: set[str], run: str | None) -> list[Gap]:
    """A column's merged kinds against the catalog's; and its merged descriptions (``shown``): each
    DIRECT one the catalog expects is in them, and nothing else is (what is left names what Spark ran)."""
    catalog = set().union(*want.values())
    kinds = {kind[:2] for kind in set().union(*got.values())}
    if {kind[:2] for kind in catalog} != kinds:
        spelled = _spell({(*kind, "") for kind in kinds})
        return [Gap(dataset.key, column, None, _spell(catalog), f"{spelled} (the column's merged transformation)", run)]
    wanted = sorted({how for _, _, how in catalog if how})
    own = {dataset.designed.columns[column]} if dataset.designed is not None else set()  # first in each description
    described = sorted(
        {s.transformation.description for s in dataset.expected_lineage[column]} | own, key=len, reverse=True
    )
    rest: set[str] = set()
    for text in shown:
        for description in described:  # longest first: one description may hold another
            text = text.replace(description, "")
        rest.update(part for part in text.split("; ") if part.strip())
    if rest or any(how not in text for how in wanted for text in shown):
        ran = "; ".join(sorted(rest)) or "without it"
        return [Gap(dataset.key, column, None, "; ".join(wanted), f"{ran} (the column's merged description)", run)]
    return []

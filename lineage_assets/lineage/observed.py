"""Observed column lineage: what a Spark job's plan says each written column came from
(``spark/lineage.py``), put in the catalog's terms and held against the catalog's expectation.

A job names its inputs as its plan does: a Kafka relation's columns (``key``, ``value``, a field read
from the value through ``from_avro`` as ``value.<field>``, the record's metadata) or a table's. Here
they become the catalog's datasets and fields: a value field is that field of the topic, the value's
bytes used whole are every field of it, the key is the topic's ``record_key`` field, and a record's
metadata (topic, partition, offset, timestamp) is no field of the topic's schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from lineage_assets.datasets import DATASETS, ColumnSource, Dataset, Kind, Transformation
from lineage_assets.settings import Settings

ColumnLineage = dict[str, tuple[ColumnSource, ...]]  # output column -> its inputs, each with one transformation
Kinds = dict[tuple[str, str], set[tuple[str, str]]]  # (dataset key, field) -> {(type, subtype)}


class ObservationError(ValueError):
    """A job's observed lineage names an input that is no dataset of the catalog."""


def _described(dataset: Dataset, column: str) -> dict[tuple[str, str, str, str], Transformation]:
    """The catalog's transformations of ``column`` by (input dataset, field, type, subtype): an observed
    one the catalog expects keeps the catalog's description."""
    return {
        (s.dataset, s.column, s.transformation.type, s.transformation.subtype): s.transformation
        for s in dataset.expected_lineage.get(column, ())
    }


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


def from_report(report: Mapping, dataset: Dataset, settings: Settings) -> ColumnLineage:
    """A job report's ``column_lineage`` (``spark/lineage.report``) as the catalog's types: per written
    column each input field with each of its transformations, the dataset-wide ones included. A
    transformation the catalog expects keeps the catalog's description; another is described by the
    functions Spark's plan applies."""
    by_source = _datasets_by_source(settings)
    unresolved = list(report.get("unresolved") or [])

    def sources(entry: Mapping, column: str) -> list[ColumnSource]:
        upstream = by_source.get(entry["source"])
        if upstream is None:
            unresolved.append(f"input {entry['source']} is no dataset of the catalog")
            return []
        described = _described(dataset, column)
        result = []
        for name in _fields(upstream, entry["field"]):
            kind = (upstream.key, name, entry["type"], entry["subtype"])
            functions = entry.get("functions") or []
            transformation = described.get(kind) or Transformation(
                entry["type"],
                entry["subtype"],
                f"{', '.join(functions)} (Spark's plan)" if functions else "in Spark's plan",
            )
            result.append(ColumnSource(upstream.key, name, transformation))
        return result

    lineage: ColumnLineage = {}
    shared = [(entry, None) for entry in report.get("dataset") or []]
    for column, entries in (report.get("columns") or {}).items():
        found: dict[tuple[str, str, str, str], ColumnSource] = {}
        for entry in [*entries, *(e for e, _ in shared)]:
            for source in sources(entry, column):
                key = (source.dataset, source.column, source.transformation.type, source.transformation.subtype)
                found.setdefault(key, source)
        direct = {(d, c) for d, c, kind, _ in found if kind == "DIRECT"}
        # A field the column is computed from is not listed again for choosing between its values.
        lineage[column] = tuple(
            source for key, source in found.items() if not (key[3] == "CONDITIONAL" and key[:2] in direct)
        )
    if unresolved:
        raise ObservationError(
            f"the observed lineage of {dataset.key} cannot be read: {'; '.join(dict.fromkeys(unresolved))}"
        )
    return lineage


def from_facet(facet: Mapping, dataset: Dataset, settings: Settings, columns: list[str] = ()) -> ColumnLineage:
    """A ``columnLineage`` facet that openlineage-spark derived for ``dataset`` as the catalog's types:
    per written column (``columns``, and those the facet names) each input field with each of its
    transformations; the facet's dataset-wide inputs apply to every column."""
    by_node = {}
    for candidate in DATASETS.values():
        identity = candidate.identity(settings)
        by_node[identity.node] = candidate
        by_node.update({(symlink.namespace, symlink.name): candidate for symlink in identity.symlinks})
    unresolved = []

    def sources(field: Mapping, column: str) -> list[ColumnSource]:
        upstream = by_node.get((field["namespace"], field["name"]))
        if upstream is None:
            unresolved.append(f"input {field['namespace']}:{field['name']} is no dataset of the catalog")
            return []
        described = _described(dataset, column)
        return [
            ColumnSource(
                upstream.key,
                field["field"],
                described.get(
                    (upstream.key, field["field"], t["type"], t.get("subtype") or ""),
                    Transformation(
                        t["type"], t.get("subtype") or "", t.get("description") or "in openlineage-spark's plan"
                    ),
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


def kinds_of(sources: tuple[ColumnSource, ...]) -> Kinds:
    kinds: Kinds = {}
    for source in sources:
        kinds.setdefault((source.dataset, source.column), set()).add(
            (source.transformation.type, source.transformation.subtype)
        )
    return kinds


def disagreements(ours: ColumnLineage, theirs: ColumnLineage) -> list[str]:
    """Where two observations of one write differ: per column and input field, each one's kinds."""
    found = []
    for column in dict.fromkeys([*ours, *theirs]):
        mine, other = kinds_of(ours.get(column, ())), kinds_of(theirs.get(column, ()))
        for source in sorted(set(mine) | set(other)):
            if mine.get(source) != other.get(source):
                found.append(
                    f"{column} from {source[0]}.{source[1]}: {_spell(mine.get(source, set()))} "
                    f"against {_spell(other.get(source, set()))}"
                )
    return found


def _spell(kinds: set[tuple[str, str]]) -> str:
    return ", ".join(f"{kind}/{subtype}" for kind, subtype in sorted(kinds)) or "nothing"


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


def gaps(dataset: Dataset, observed: Mapping[str, Kinds], run: str | None = None, merged: bool = False) -> list[Gap]:
    """Every difference between ``dataset``'s expected column lineage and ``observed`` (per column, each
    input field's (type, subtype) kinds). ``merged``: each input of a column carries the column's
    merged kinds (all Marquez 0.51 keeps of a hop), so the column's kinds are compared as a whole."""
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
            elif not merged and want[source] != got[source]:
                found.append(Gap(dataset.key, column, upstream, _spell(want[source]), _spell(got[source]), run))
        if merged and want and got:
            catalog_kinds = set().union(*want.values())
            shown = set().union(*got.values())
            if catalog_kinds != shown:
                found.append(
                    Gap(
                        dataset.key,
                        column,
                        None,
                        _spell(catalog_kinds),
                        f"{_spell(shown)} (the column's merged transformation)",
                        run,
                    )
                )
    return found

"""Observed column lineage: what a Spark job's plan says each written column came from
(``spark/lineage.py``), put in the catalog's terms and held against the catalog's expectation.

A job names its inputs as its plan does: a Kafka relation's columns (``key``, ``value``, a field read
from the value through ``from_avro`` as ``value.<field>``, the record's metadata) or a table's. Here
they become the catalog's datasets and fields: a value field is that field of the topic, the value's
bytes used whole are every field of it, the key is the topic's ``record_key`` field, and a record's
metadata (topic, partition, offset, timestamp) is no field of the topic's schema.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lineage_assets.datasets import DATASETS, ColumnSource, Dataset, Kind, Transformation
from lineage_assets.settings import Settings

ColumnLineage = dict[str, tuple[ColumnSource, ...]]  # output column -> its inputs, each with one transformation
InputKind = tuple[str, str, str, str]  # (input dataset, field, type, subtype)
# (dataset key, field) -> {(type, subtype, how)}; how: a DIRECT transformation's description, which
# names what ran when it is not what the catalog expects.
Kinds = dict[tuple[str, str], set[tuple[str, str, str]]]


class ObservationError(ValueError):
    """A job's observed lineage names an input that is no dataset of the catalog."""


def _described(dataset: Dataset, column: str) -> dict[tuple[str, str, str, str], Transformation]:
    """The catalog's transformations of ``column`` by (input dataset, field, type, subtype)."""
    return {
        (s.dataset, s.column, s.transformation.type, s.transformation.subtype): s.transformation
        for s in dataset.expected_lineage.get(column, ())
    }


def _as_ran(expected: Transformation | None, kind: str, subtype: str, functions: frozenset[str]) -> Transformation:
    """An observed transformation in the catalog's words when it is the one the catalog expects (for a
    DIRECT one: through exactly the functions the catalog names), else in Spark's plan's."""
    if expected is not None and (kind != "DIRECT" or expected.functions == functions):
        return expected
    return Transformation(kind, subtype, f"Spark's plan: {', '.join(sorted(functions)) or 'no function'}", functions)


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


def from_report(report: Mapping[str, Any], dataset: Dataset, settings: Settings) -> ColumnLineage:
    """A job report's ``column_lineage`` (``spark/lineage.report``) as the catalog's types: per written
    column each input field with each of its transformations, the dataset-wide ones included. A
    transformation the catalog expects keeps the catalog's description; another is described by the
    functions Spark's plan applies."""
    by_source = _datasets_by_source(settings)
    unresolved = list(report.get("unresolved") or [])

    def kinds(entry: Mapping[str, Any]) -> list[InputKind]:
        upstream = by_source.get(entry["source"])
        if upstream is None:
            unresolved.append(f"input {entry['source']} is no dataset of the catalog")
            return []
        return [(upstream.key, name, entry["type"], entry["subtype"]) for name in _fields(upstream, entry["field"])]

    lineage: ColumnLineage = {}
    for column, entries in (report.get("columns") or {}).items():
        # One input field read several ways (the record's bytes whole and one decoded field) is one
        # transformation through all their functions.
        found: dict[InputKind, frozenset[str]] = {}
        for entry in [*entries, *(report.get("dataset") or [])]:
            for key in kinds(entry):
                found[key] = found.get(key, frozenset()) | frozenset(entry.get("functions") or ())
        described = _described(dataset, column)
        direct = {key[:2] for key in found if key[2] == "DIRECT"}
        # A field the column is computed from is not listed again for choosing between its values.
        lineage[column] = tuple(
            ColumnSource(key[0], key[1], _as_ran(described.get(key), key[2], key[3], functions))
            for key, functions in found.items()
            if not (key[3] == "CONDITIONAL" and key[:2] in direct)
        )
    if unresolved:
        raise ObservationError(
            f"the observed lineage of {dataset.key} cannot be read: {'; '.join(dict.fromkeys(unresolved))}"
        )
    return lineage


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


def kinds_of(sources: tuple[ColumnSource, ...], described: bool = True) -> Kinds:
    """Per input field the kinds of its transformations; ``described``: with each DIRECT one's description."""
    kinds: Kinds = {}
    for source in sources:
        t = source.transformation
        how = t.description if described and t.type == "DIRECT" else ""
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
    described = sorted({s.transformation.description for s in dataset.expected_lineage[column]}, key=len, reverse=True)
    rest: set[str] = set()
    for text in shown:
        for description in described:  # longest first: one description may hold another
            text = text.replace(description, "")
        rest.update(part for part in text.split("; ") if part.strip())
    if rest or any(how not in text for how in wanted for text in shown):
        ran = "; ".join(sorted(rest)) or "without it"
        return [Gap(dataset.key, column, None, "; ".join(wanted), f"{ran} (the column's merged description)", run)]
    return []

"""Column lineage of a DataFrame as Spark planned it: which source field each written column comes
from, and how (OpenLineage's transformation types), read from the analyzed logical plan.

openlineage-spark derives the same from a plan, but only for the actions it sees: not for what a
streaming query writes through ``foreachBatch``, nor through ``from_avro``, nor for a streaming
aggregation (OpenLineage issues #1581, #2867, #3398). So the jobs read the plan of the DataFrame they
write themselves: Spark serializes it in one call (``TreeNode.toJSON``), and the walk over it below is
plain Python over that data, testable without a session.

The result names each input by its leaf relation and the relation's column: ``kafka:<topic>`` with
``key``, ``value``, ``value.<field>`` (a field of an Avro value read through ``from_avro``) or a
record's metadata column; ``table:<catalog table>`` with a table column. ``lineage_assets.lineage.
observed`` maps them onto the dataset catalog.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame

IDENTITY, TRANSFORMATION, AGGREGATION = "IDENTITY", "TRANSFORMATION", "AGGREGATION"
_RANK = {IDENTITY: 0, TRANSFORMATION: 1, AGGREGATION: 2}
_MASKING = {"Sha1", "Sha2", "Md5", "Crc32", "Murmur3Hash", "XxHash64", "Mask"}

Field = tuple[str, str]  # (leaf relation, its column)


@dataclass
class Lineage:
    """What one expression's value comes from: each input field with its subtype and the functions on
    the way (``direct``); the fields that choose between values (``conditional``); a struct's fields
    by name (``struct``); for a decoded Avro record, the raw columns whose fields it reads (``record``)."""

    direct: dict[Field, tuple[str, tuple[str, ...], bool]] = field(default_factory=dict)  # subtype, functions, masking
    conditional: set[Field] = field(default_factory=set)
    struct: dict[str, Lineage] | None = None
    record: set[Field] | None = None

    def flat(self) -> Lineage:
        """One value's lineage: a struct's fields, or a whole decoded record's bytes, all flow into it."""
        merged = Lineage(dict(self.direct), set(self.conditional))
        for source in self.record or ():
            merged.merge(Lineage({source: (IDENTITY, (), False)}))
        for member in (self.struct or {}).values():
            merged.merge(member.flat())
        return merged

    def merge(self, other: Lineage) -> None:
        for source, (subtype, functions, masking) in other.direct.items():
            known = self.direct.get(source)
            if known is None or _RANK[subtype] > _RANK[known[0]]:
                self.direct[source] = (subtype, functions, masking)
            elif _RANK[subtype] == _RANK[known[0]]:
                self.direct[source] = (subtype, tuple(dict.fromkeys(known[1] + functions)), known[2] or masking)
        self.conditional |= other.conditional
        if other.record is not None:
            self.record = (self.record or set()) | other.record
        if other.struct is not None:
            self.struct = {**(self.struct or {}), **other.struct}

    def field_of(self, name: str) -> Lineage:
        """The lineage of field ``name`` of this struct or decoded record."""
        if self.struct is not None and name in self.struct:
            chosen = self.struct[name]
            return Lineage(dict(chosen.direct), chosen.conditional | self.conditional, chosen.struct, chosen.record)
        if self.record is not None:
            return Lineage(
                {(leaf, f"{column}.{name}"): (IDENTITY, (), False) for leaf, column in self.record},
                set(self.conditional),
            )
        return self.flat()

    def through(self, function: str | None, subtype: str = TRANSFORMATION) -> Lineage:
        """This value passed through ``function`` (None: an aggregation, named by its function), which
        makes each input at least a ``subtype``."""
        flat = self.flat()
        masking = function in _MASKING
        return Lineage(
            {
                source: (
                    subtype if _RANK[subtype] > _RANK[current] else current,
                    (function, *functions) if function else functions,
                    was_masking or masking,
                )
                for source, (current, functions, was_masking) in flat.direct.items()
            },
            flat.conditional,
        )


@dataclass(frozen=True)
class Node:
    cls: str
    fields: dict
    children: tuple[Node, ...]

    @property
    def name(self) -> str:
        return self.cls.rsplit(".", 1)[-1]


def tree(nodes: list[dict]) -> Node:
    """A tree node from Spark's pre-order JSON list of it (each entry with ``num-children``)."""
    position = 0

    def build() -> Node:
        nonlocal position
        entry = nodes[position]
        position += 1
        children = tuple(build() for _ in range(entry["num-children"]))
        return Node(entry["class"], entry, children)

    return build()


def _expr_id(node: Node) -> int:
    return node.fields["exprId"]["id"]


class PlanLineage:
    """The walk over one analyzed plan (``tree`` of ``plan.toJSON()``): ``columns()`` and ``indirect``.

    ``leaves``: the identity of each leaf relation in the plan's pre-order (None: not a source)."""

    def __init__(self, plan: Node, leaves: list[str | None]):
        self.attributes: dict[int, Lineage] = {}
        self.indirect: dict[Field, set[str]] = {}  # field -> INDIRECT subtypes that apply to every row
        self.unknown: set[str] = set()
        self._leaves = iter(leaves)
        self.output = self._visit(plan)

    def _add_indirect(self, subtype: str, expressions: list) -> None:
        for expression in expressions:
            flat = self.expression(tree(expression)).flat()
            # Whether a row passes a filter also depends on what chose the condition's value; a group
            # or sort key's value is the key.
            for source in [*flat.direct, *(flat.conditional if subtype == "FILTER" else ())]:
                self.indirect.setdefault(source, set()).add(subtype)

    def _visit(self, plan: Node) -> list[tuple[str, int]]:
        """The plan node's output (name, expression id), after recording its attributes' lineage."""
        if not plan.children:
            leaf = next(self._leaves, None)
            output = [tree(attribute) for attribute in plan.fields.get("output") or []]
            for attribute in output:
                self.attributes[_expr_id(attribute)] = (
                    Lineage({(leaf, attribute.fields["name"]): (IDENTITY, (), False)}) if leaf else Lineage()
                )
            return [(a.fields["name"], _expr_id(a)) for a in output]
        outputs = [self._visit(child) for child in plan.children]
        name, fields = plan.name, plan.fields
        if name in ("Project", "Aggregate", "Window"):
            listed = fields[
                "aggregateExpressions"
                if name == "Aggregate"
                else "windowExpressions"
                if name == "Window"
                else "projectList"
            ]
            named = [tree(expression) for expression in listed]
            for expression in named:
                if expression.name != "AttributeReference":
                    self.attributes[_expr_id(expression)] = self.expression(expression)
            if name == "Aggregate":
                self._add_indirect("GROUP_BY", fields["groupingExpressions"])
            if name == "Window":
                self._add_indirect("WINDOW", fields.get("partitionSpec") or [])
                return outputs[0] + [(e.fields["name"], _expr_id(e)) for e in named]
            return [(e.fields["name"], _expr_id(e)) for e in named]
        if name == "Filter":
            self._add_indirect("FILTER", [fields["condition"]])
        elif name == "EventTimeWatermark":  # rows behind the watermark are dropped
            self._add_indirect("FILTER", [fields["eventTime"]])
        elif name == "Sort":
            self._add_indirect("SORT", [order for order in fields.get("order") or []])
        elif name == "Join":
            if fields.get("condition"):
                self._add_indirect("JOIN", [fields["condition"]])
            return outputs[0] + outputs[1]
        elif name == "Union":
            for column in zip(*outputs):
                merged = Lineage()
                for _, expr_id in column:
                    merged.merge(self.attributes.get(expr_id, Lineage()))
                self.attributes[column[0][1]] = merged
        elif len(plan.children) != 1:
            self.unknown.add(name)
        return outputs[0]

    def expression(self, node: Node) -> Lineage:
        name = node.name
        if name == "AttributeReference":
            known = self.attributes.get(_expr_id(node))
            if known is None:
                self.unknown.add(f"attribute {node.fields['name']}#{_expr_id(node)}")
                return Lineage()
            return known
        children = [self.expression(child) for child in node.children]
        if name in ("Alias", "KnownNullable", "KnownNotNull", "PromotePrecision"):
            return children[0]
        if name == "GetStructField":
            return children[0].field_of(node.fields["name"])
        if name == "CreateNamedStruct":  # children: name literal, value, name literal, value, ...
            names: list[str] = [child.fields["value"] for child in node.children[0::2]]
            return Lineage(struct=dict(zip(names, children[1::2])))
        if name == "StructsToJson":  # a JSON text of the struct: its fields keep their lineage
            return children[0]
        if name in ("FromAvro", "AvroDataToCatalyst"):  # a record whose fields are fields of the bytes read
            flat = children[0].flat()  # the others: its schema and options
            return Lineage(conditional=flat.conditional, record={source for source in flat.direct})
        if name in ("CaseWhen", "If", "Coalesce"):
            if name == "CaseWhen":
                conditions = list(range(0, len(children) - len(children) % 2, 2))
            else:
                conditions = [0] if name == "If" else []
            result = Lineage()
            for index, child in enumerate(children):
                if index in conditions:
                    result.conditional |= set(child.flat().direct) | child.conditional
                elif child.struct is None and child.record is None:
                    # A value chosen among others passes through the choice, which is no copy: a CASE WHEN
                    # that changes one supplier's prices shows in the column's functions.
                    result.merge(child.through(name, IDENTITY))
                else:  # a record or struct chosen whole keeps its fields' own lineage
                    result.merge(child)
            return result
        merged = Lineage()
        for child in children:
            merged.merge(child.flat())
        if name == "AggregateExpression":  # above the aggregate function (Sum, Count ...), which names it
            return merged.through(None, AGGREGATION)
        return merged.through(name)

    def columns(self, expand: str | None = None) -> dict[str, Lineage]:
        """Each output column's lineage; ``expand``: a column holding a struct (e.g. a Kafka record's
        JSON ``value``) whose fields are the written columns instead."""
        result = {}
        for name, expr_id in self.output:
            lineage = self.attributes.get(expr_id, Lineage())
            if expand is None:
                result[name] = lineage
            elif name == expand and lineage.struct is not None:
                result.update({member: lineage.field_of(member) for member in lineage.struct})
        if expand is not None and not result:
            self.unknown.add(f"column {expand} is not a struct of named fields")
        return result


def report(lineage: PlanLineage, expand: str | None = None) -> dict:
    """The job report's ``column_lineage``: per written column its inputs (DIRECT, and INDIRECT
    CONDITIONAL), and the INDIRECT inputs that shape every row (``dataset``)."""

    def input_field(
        source: Field, kind: str, subtype: str, functions: tuple[str, ...] = (), masking: bool = False
    ) -> dict:
        leaf, column = source
        return {
            "source": leaf,
            "field": column,
            "type": kind,
            "subtype": subtype,
            **({"functions": list(functions)} if functions else {}),
            **({"masking": True} if masking else {}),
        }

    columns = {}
    for name, column in lineage.columns(expand).items():
        flat = column.flat() if column.struct is None else column
        fields = [
            input_field(source, "DIRECT", subtype, functions, masking)
            for source, (subtype, functions, masking) in sorted(flat.direct.items())
        ]
        # A field the column is computed from is not listed again for choosing between its values.
        fields += [
            input_field(source, "INDIRECT", "CONDITIONAL") for source in sorted(flat.conditional - set(flat.direct))
        ]
        columns[name] = fields
    return {
        "columns": columns,
        "dataset": [
            input_field(source, "INDIRECT", subtype)
            for source, subtypes in sorted(lineage.indirect.items())
            for subtype in sorted(subtypes)
        ],
        "unresolved": sorted(lineage.unknown),
    }


def leaf_identity(leaf, default: str | None) -> str | None:
    """A leaf relation of a plan (a JVM object) as ``kafka:<topic>`` or ``table:<name>``; ``default``
    for one the plan does not name (a ``foreachBatch`` micro-batch's rows, rows given in memory)."""
    name = leaf.nodeName()
    if name in ("StreamingRelationV2", "StreamingDataSourceV2Relation", "StreamingDataSourceV2ScanRelation"):
        options = leaf.extraOptions() if name == "StreamingRelationV2" else leaf.relation().options()
        topic = options.get("subscribe")
        if topic:
            return f"kafka:{topic}"
    if name in ("DataSourceV2Relation",):
        return f"table:{leaf.table().name()}"
    return default


def observe(frame: DataFrame, source: str | None = None, expand: str | None = None) -> dict[str, Any]:
    """The column lineage of ``frame`` as its analyzed plan says (``report``); ``source``: the
    identity of a leaf the plan does not name (``leaf_identity``)."""
    started = time.perf_counter()
    analyzed = frame._jdf.queryExecution().analyzed()
    jleaves = analyzed.collectLeaves()
    leaves = [leaf_identity(jleaves.apply(i), source) for i in range(jleaves.size())]
    observed = report(PlanLineage(tree(json.loads(analyzed.toJSON())), leaves), expand)
    return {**observed, "seconds": round(time.perf_counter() - started, 3)}  # what observing cost the job

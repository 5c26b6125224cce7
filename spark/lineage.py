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

import dataclasses
import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

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
    text: str = ""  # the derivation: the expression as Spark computes it, down to the input fields

    def flat(self) -> Lineage:
        """One value's lineage: a struct's fields, or a whole decoded record's bytes, all flow into it."""
        merged = Lineage(dict(self.direct), set(self.conditional), text=self.text)
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
            return Lineage(
                dict(chosen.direct), chosen.conditional | self.conditional, chosen.struct, chosen.record, chosen.text
            )
        if self.record is not None:
            fields = sorted((leaf, f"{column}.{name}") for leaf, column in self.record)
            return Lineage(
                dict.fromkeys(fields, (IDENTITY, (), False)),
                set(self.conditional),
                text=", ".join(token(source) for source in fields),
            )
        return dataclasses.replace(self.flat(), text=f"{self.text}.{name}")

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


# A column marked where it is built (``derived_as``, ``named_step``), which derivations name instead of
# spelling out its expression.
DERIVATION_KEY = "lineage.derivation"


def derived_as(column: Column, name: str, description: str) -> Column:
    """``column`` named ``name``, in derivations ``description``: for a column whose expression depends
    on data a run reads (the registry's versions), not on the code alone."""
    return column.alias(name, metadata={DERIVATION_KEY: description})


def named_step(column: Column, name: str) -> Column:
    """``column`` named ``name``, which derivations that read it name instead of repeating it; a
    written column that is this one is spelled out."""
    return column.alias(name, metadata={DERIVATION_KEY: ""})


def token(source: Field) -> str:
    """An input field in a derivation text, until ``lineage_assets.lineage.observed`` names it."""
    leaf, column = source
    return f"«{leaf}|{column}»"


def _expressions(fields: dict) -> list[tuple[str, int]]:
    """The keys (field, position) of a plan node's expressions in the order Spark lists them
    (``QueryPlan.expressions``: its constructor's fields, each an expression or a list of them)."""
    keys = []
    for name, value in fields.items():
        if isinstance(value, list) and value and isinstance(value[0], dict) and "class" in value[0]:
            keys.append((name, 0))
        elif isinstance(value, list) and value and all(isinstance(v, list) for v in value):
            if all(v and isinstance(v[0], dict) and "class" in v[0] for v in value):
                keys.extend((name, position) for position in range(len(value)))
    return keys


@dataclass
class PlanTexts:
    """What Spark prints of a plan's expressions (``Expression.toString``: literals, types, flags
    and ``name#id`` attributes, which the JSON of the plan does not all keep), per plan node in
    pre-order: ``expressions[node][(field, position)]``; the members of a named struct an
    expression builds (``structs[node][(field, position)]``); a watermark's delay (``delays``); the
    marks of ``derived_as`` and ``named_step`` (``marks``)."""

    expressions: list[dict[tuple[str, int], str]] = field(default_factory=list)
    marks: list[dict[tuple[str, int], str]] = field(default_factory=list)
    structs: list[dict[tuple[str, int], dict[str, tuple[str, str]]]] = field(default_factory=list)  # text, type
    delays: list[str | None] = field(default_factory=list)


class PlanLineage:
    """The walk over one analyzed plan (``tree`` of ``plan.toJSON()``): ``columns()`` and ``indirect``.

    ``leaves``: the identity of each leaf relation in the plan's pre-order (``leaf_identity``);
    ``texts``: what Spark prints of the plan's expressions, from which each column's derivation is
    written; ``parameters``: literal texts that are a run's arguments (a day), written as ``:name``."""

    def __init__(
        self,
        plan: Node,
        leaves: list[str],
        texts: PlanTexts | None = None,
        parameters: dict[str, str] | None = None,
    ):
        self.attributes: dict[int, Lineage] = {}
        self.names: dict[int, str] = {}
        self.members: dict[int, dict[str, str]] = {}  # a struct attribute's members' texts
        self.steps: dict[int, str] = {}  # a named step's derivation
        self.member_types: dict[int, dict[str, str]] = {}  # a struct attribute's members' types
        self.indirect: dict[Field, set[tuple[str, str]]] = {}  # field -> (INDIRECT subtype, what it is)
        self.unknown: set[str] = set()
        self._leaves = iter(leaves)
        self._texts = texts or PlanTexts()
        self._parameters = parameters or {}
        self._position = 0
        self._pattern: tuple[int, re.Pattern] | None = None
        self._plan_fields: list[dict] = []  # each plan node's fields, in pre-order
        self.output = self._visit(plan)

    def _printed(self, node: int, key: tuple[str, int]) -> str | None:
        printed = self._texts.expressions[node] if node < len(self._texts.expressions) else {}
        return printed.get(key)

    def text(self, printed: str | None) -> str:
        """A printed expression as a derivation: each attribute replaced by its own derivation, each
        parameter's literal by its name."""
        if printed is None:
            return "?"

        def attribute(match: re.Match) -> str:
            expr_id, member = int(match.group(1).rsplit("#", 1)[1]), match.group(2)
            if member and member[1:] in self.members.get(expr_id, {}):
                return self.members[expr_id][member[1:]]
            known = self.attributes.get(expr_id)
            return (known.text if known is not None and known.text else match.group(1)) + (member or "")

        text = self._attribute_pattern().sub(attribute, printed)
        for name, literal in self._parameters.items():
            text = re.sub(rf"(?<![\w.:-]){re.escape(literal)}(?![\w.-])", f":{name}", text)
        return text

    def _attribute_pattern(self) -> re.Pattern:
        """``name#id`` of every attribute known so far, with Spark's suffixes for a long and a
        watermarked column, and a struct member after it."""
        if self._pattern is None or self._pattern[0] != len(self.names):
            known = sorted((f"{re.escape(name)}#{i}" for i, name in self.names.items()), key=len, reverse=True)
            alternatives = "|".join(known) or "(?!)"
            self._pattern = (len(self.names), re.compile(rf"({alternatives})(?!\d)L?(?:-T\d+ms)?(\.\w+)?"))
        return self._pattern[1]

    def _add_indirect(self, subtype: str, index: int, key: str, described: str) -> None:
        """The fields that each expression of plan node ``index``'s field ``key`` reads, as ``subtype``
        edges; ``described``: what the edge is, around the expression's derivation (``{}``)."""
        expressions = self._plan_fields[index].get(key) or []
        if expressions and isinstance(expressions[0], dict):  # one expression, not a list of them
            expressions = [expressions]
        for position, expression in enumerate(expressions):
            flat = self.expression(tree(expression)).flat()
            text = described.format(self.text(self._printed(index, (key, position))))
            # Whether a row passes a filter also depends on what chose the condition's value; a group
            # or sort key's value is the key.
            for source in [*flat.direct, *(flat.conditional if subtype == "FILTER" else ())]:
                self.indirect.setdefault(source, set()).add((subtype, text))

    def _visit(self, plan: Node) -> list[tuple[str, int]]:
        """The plan node's output (name, expression id), after recording its attributes' lineage."""
        index = self._position  # the node's place in the plan's pre-order, as ``PlanTexts`` lists them
        self._position += 1
        self._plan_fields.append(plan.fields)
        if not plan.children:
            leaf = next(self._leaves, "unnamed:?")  # a relation of its own, whatever collectLeaves listed
            output = [tree(attribute) for attribute in plan.fields.get("output") or []]
            for attribute in output:
                source: Field = (leaf, attribute.fields["name"])
                self.names[_expr_id(attribute)] = attribute.fields["name"]
                self.attributes[_expr_id(attribute)] = Lineage({source: (IDENTITY, (), False)}, text=token(source))
            return [(a.fields["name"], _expr_id(a)) for a in output]
        outputs = [self._visit(child) for child in plan.children]
        name, fields = plan.name, plan.fields
        if name in ("Project", "Aggregate", "Window"):
            listed = {"Aggregate": "aggregateExpressions", "Window": "windowExpressions"}.get(name, "projectList")
            named = [tree(expression) for expression in fields[listed]]
            for position, expression in enumerate(named):
                if expression.name != "AttributeReference":
                    self._define(expression, index, (listed, position))
            if name == "Aggregate":
                self._add_indirect("GROUP_BY", index, "groupingExpressions", "grouped by {}")
            if name == "Window":
                self._add_indirect("WINDOW", index, "partitionSpec", "window over {}")
                return outputs[0] + [(e.fields["name"], _expr_id(e)) for e in named]
            return [(e.fields["name"], _expr_id(e)) for e in named]
        if name == "Filter":
            self._add_indirect("FILTER", index, "condition", "rows where {}")
        elif name == "EventTimeWatermark":  # rows behind the watermark are dropped
            delay = self._texts.delays[index] if index < len(self._texts.delays) else None
            self._add_indirect("FILTER", index, "eventTime", f"rows within the watermark: {{}} less {delay}")
        elif name == "Sort":
            self._add_indirect("SORT", index, "order", "sorted by {}")
        elif name == "Join":
            join = (fields.get("joinType") or {}).get("object", "").rsplit(".", 1)[-1].rstrip("$")
            self._add_indirect("JOIN", index, "condition", f"{join} join on {{}}")
            return outputs[0] + outputs[1]
        elif name == "Union":
            for column in zip(*outputs):
                merged = Lineage()
                for _, expr_id in column:
                    merged.merge(self.attributes.get(expr_id, Lineage()))
                texts = dict.fromkeys(self.attributes[e].text for _, e in column if e in self.attributes)
                merged.text = " UNION ".join(texts)
                self.attributes[column[0][1]] = merged
        elif len(plan.children) != 1:
            self.unknown.add(name)
        return outputs[0]

    def _define(self, expression: Node, index: int, key: tuple[str, int]) -> None:
        """Record a named expression's lineage and derivation under its expression id."""
        expr_id = _expr_id(expression)
        self.names[expr_id] = expression.fields["name"]
        lineage = self.expression(expression)
        marks = self._texts.marks[index] if index < len(self._texts.marks) else {}
        if marks.get(key):  # its inputs too may depend on the run's data: named by what it is alone
            text = marks[key]
        elif lineage.record is not None and lineage.struct is None:
            text = f"decoded({', '.join(token(source) for source in sorted(lineage.record))})"
        else:
            printed = self._printed(index, key)
            if printed is not None and expression.name == "Alias":
                printed = re.sub(rf" AS {re.escape(expression.fields['name'])}#{expr_id}L?(?:-T\d+ms)?$", "", printed)
            text = self.text(printed)
            if key in marks:  # a named step: spelled out where it is written
                self.steps[expr_id] = text
                text = expression.fields["name"]
        structs = self._texts.structs[index] if index < len(self._texts.structs) else {}
        if key in structs:
            self.members[expr_id] = {member: self.text(printed) for member, (printed, _) in structs[key].items()}
            self.member_types[expr_id] = {member: kind for member, (_, kind) in structs[key].items()}
        self.attributes[expr_id] = dataclasses.replace(lineage, text=text)

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
                result[name] = dataclasses.replace(lineage, text=self.steps.get(expr_id, lineage.text))
            elif name == expand and lineage.struct is not None:
                texts = self.members.get(expr_id, {})
                result.update(
                    {
                        member: dataclasses.replace(lineage.field_of(member), text=texts.get(member, "?"))
                        for member in lineage.struct
                    }
                )
        if expand is not None and not result:
            self.unknown.add(f"column {expand} is not a struct of named fields")
        return result


def report(lineage: PlanLineage, expand: str | None = None) -> dict:
    """The job report's ``column_lineage``: per written column its inputs (DIRECT, and INDIRECT
    CONDITIONAL) and its derivation, and the INDIRECT inputs that shape every row (``dataset``), each
    with what it is (the predicate, the join condition or the key)."""

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

    columns, derivations = {}, {}
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
        derivations[name] = column.text
    return {
        "columns": columns,
        "derivations": derivations,
        "dataset": [
            {**input_field(source, "INDIRECT", subtype), "derivation": text}
            for source, kinds in sorted(lineage.indirect.items())
            for subtype, text in sorted(kinds)
        ],
        "unresolved": sorted(lineage.unknown),
    }


def _output_ids(plan) -> frozenset[int]:
    output = plan.output()
    return frozenset(output.apply(i).exprId().id() for i in range(output.size()))


def leaf_identity(leaf, inputs: Mapping[frozenset[int], str]) -> str:
    """A leaf relation of a plan (a JVM object) as ``kafka:<topic>`` or ``table:<name>``; one the plan
    does not name (a ``foreachBatch`` micro-batch's rows, rows given in memory) as the identity of the
    given input whose output it is (``inputs``: by their output's expression ids), else as
    ``unnamed:<relation>``: an input of no known dataset."""
    name = leaf.nodeName()
    if name in ("StreamingRelationV2", "StreamingDataSourceV2Relation", "StreamingDataSourceV2ScanRelation"):
        options = leaf.extraOptions() if name == "StreamingRelationV2" else leaf.relation().options()
        topic = options.get("subscribe")
        if topic:
            return f"kafka:{topic}"
    if name in ("DataSourceV2Relation",):
        return f"table:{leaf.table().name()}"
    return inputs.get(_output_ids(leaf), f"unnamed:{name}")


def _jvm_list(seq) -> list:
    return [seq.apply(i) for i in range(seq.size())]


def _struct_members(expression) -> dict[str, tuple[str, str]] | None:
    """What Spark prints of each member of the named struct a named expression builds (directly, or
    as the JSON text of one), and its type; None for another expression."""
    node = expression.child() if expression.nodeName() == "Alias" else expression
    while node.nodeName() in ("StructsToJson", "KnownNullable", "KnownNotNull"):
        node = node.child()
    if node.nodeName() != "CreateNamedStruct":
        return None
    names = [str(name) for name in _jvm_list(node.names())]
    values = _jvm_list(node.valExprs())
    return {name: (str(value.toString()), str(value.dataType().simpleString())) for name, value in zip(names, values)}


def plan_texts(plan, nodes: list[dict]) -> PlanTexts:
    """``PlanTexts`` of an analyzed plan (a JVM object) whose ``toJSON`` is ``nodes``."""
    texts = PlanTexts()
    pending = [plan]
    while pending:  # in pre-order, as ``toJSON`` lists the nodes
        node = pending.pop(0)
        entry = nodes[len(texts.expressions)]
        expressions = _jvm_list(node.expressions())
        keys = _expressions(entry)
        printed, structs, marks = {}, {}, {}
        for key, expression in zip(keys, expressions):
            printed[key] = str(expression.toString())
            if (members := _struct_members(expression)) is not None:
                structs[key] = members
            if expression.nodeName() == "Alias" and expression.metadata().contains(DERIVATION_KEY):
                marks[key] = str(expression.metadata().getString(DERIVATION_KEY))
        texts.expressions.append(printed)
        texts.marks.append(marks)
        texts.structs.append(structs)
        texts.delays.append(str(node.delay().toString()) if node.nodeName() == "EventTimeWatermark" else None)
        pending[0:0] = _jvm_list(node.children())
    return texts


def literal_text(spark: SparkSession, value: Any) -> str:
    """How Spark prints ``value`` as a literal in a plan."""
    projected = spark.range(1).select(F.lit(value).alias("value"))._jdf.queryExecution().analyzed()
    return str(projected.expressions().apply(0).child().toString())


def observe(
    frame: DataFrame,
    inputs: Mapping[str, DataFrame] | None = None,
    expand: str | None = None,
    parameters: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The column lineage of ``frame`` as its analyzed plan says (``report``). ``inputs``: the
    identities of frames it is computed from whose relations do not name themselves
    (``leaf_identity``); ``parameters``: the run's arguments whose literals a derivation names
    instead (``{"day": day}``)."""
    started = time.perf_counter()
    analyzed = frame._jdf.queryExecution().analyzed()
    given = {}
    for identity, source in (inputs or {}).items():
        leaves = source._jdf.queryExecution().analyzed().collectLeaves()
        given.update({_output_ids(leaf): identity for leaf in _jvm_list(leaves)})
    jleaves = _jvm_list(analyzed.collectLeaves())
    leaves = [leaf_identity(leaf, given) for leaf in jleaves]
    # A table's location names it as openlineage-spark does, for an input the catalog does not know.
    locations = {
        identity: str(location)
        for identity, leaf in zip(leaves, jleaves)
        if leaf.nodeName() == "DataSourceV2Relation" and (location := leaf.table().properties().get("location"))
    }
    printed = {name: literal_text(frame.sparkSession, value) for name, value in (parameters or {}).items()}
    nodes = json.loads(analyzed.toJSON())
    walk = PlanLineage(tree(nodes), leaves, plan_texts(analyzed, nodes), printed)
    observed = report(walk, expand)
    schema = [[f.name, f.dataType.simpleString()] for f in frame.schema.fields]
    if expand is not None:  # the written columns are the fields of one column's struct
        schema = [[name, kind] for name, kind in walk.member_types.get(dict(walk.output).get(expand, -1), {}).items()]
    seconds = round(time.perf_counter() - started, 3)  # what observing cost the job
    return {**observed, "schema": schema, "locations": locations, "seconds": seconds}

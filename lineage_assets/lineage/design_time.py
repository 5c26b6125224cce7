"""Each Spark job's derivations at design time: what the job writes (its own ``written``) computed from
empty inputs of their declared schemas, in a local Spark session, with the arguments its job spec
gives it, and observed as a run observes its plan. No stack and no data: ``lineage check --design``
holds the code against the designed lineage in seconds, and ``lineage accept`` writes what the code
does into it, to be reviewed as a diff.

The Kafka sources are the jobs' own (a streaming relation is planned without connecting); the
registry holds the reader schema as the one writer version, which only the registry-dependent
columns the decoder marks would differ by (``spark/lineage.derived_as``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, Observation, SparkSession

from lineage_assets import job_specs
from lineage_assets.column_lineage import DESIGNED_LINEAGE, Derivations, designed_lineage
from lineage_assets.datasets import (
    ARCHIVE,
    CHECKS,
    DATASETS,
    LAKEHOUSE_ORDERS,
    LAKEHOUSE_SUPPLIERS,
    LINEAGE_CHECK,
    ORDERS_READER_SCHEMA,
    SUPPLIER_STATS,
    SUPPLIER_STATS_LIVE,
    SUPPLIERS_AVRO_SCHEMA,
    Dataset,
)
from lineage_assets.lineage.observed import ObservationError, derivation_gaps, derivations_of
from lineage_assets.lineage.queries import declared_graph, impact, resolve
from lineage_assets.settings import PROJECT_ROOT, Settings
from lineage_assets.source_schemas import WriterVersion, judge, value_subject
from spark import (
    archive_orders,
    ingest_orders,
    ingest_suppliers,
    live_supplier_stats,
    supplier_stats,
    table_job,
    transforms,
)
from spark.support import kafka_source

# A micro-batch of the orders topic as `foreachBatch` hands it over (the source's columns, headers included).
KAFKA_BATCH = (
    "key binary, value binary, topic string, partition int, offset bigint, timestamp timestamp, "
    "timestampType int, headers array<struct<key:string,value:binary>>"
)
DESIGN_DAY = dt.date(2000, 1, 1)  # any day: a derivation names the run's day as the parameter `:day`


def _arguments(parser: argparse.ArgumentParser, spec: job_specs.JobSpec[Any]) -> argparse.Namespace:
    return parser.parse_args([*spec.arguments, "--report", "design-time"])


def _registered(topic: str, reader_schema: dict[str, Any]) -> dict[int, WriterVersion]:
    """The registry as designed: the topic's reader schema, its one writer version."""
    problems = judge(reader_schema, reader_schema)
    return {1: WriterVersion(value_subject(topic), 1, 1, json.dumps(reader_schema), problems)}


def _decoded(spark: SparkSession, args: argparse.Namespace, settings: Settings) -> DataFrame:
    """The job's source topic (a streaming relation, planned, never started), decoded as it decodes it."""
    registered = _registered(settings.orders_topic, ORDERS_READER_SCHEMA)
    return transforms.decode_orders(kafka_source.kafka_source(spark, args), args.value_schema, registered)


def _archive(spark: SparkSession, settings: Settings) -> dict[str, Any]:
    args = _arguments(archive_orders.parser(), job_specs.archive_job(settings))
    return archive_orders.column_lineage(archive_orders.written(_decoded(spark, args, settings)))


def _live_stats(spark: SparkSession, settings: Settings) -> dict[str, Any]:
    args = _arguments(live_supplier_stats.parser(), job_specs.live_stats_job(settings))
    return live_supplier_stats.column_lineage(live_supplier_stats.written(_decoded(spark, args, settings), args))


def _ingestion(spark: SparkSession, settings: Settings) -> dict[str, Any]:
    args = _arguments(ingest_orders.parser(), job_specs.ingestion_job(settings))
    batch = spark.createDataFrame([], KAFKA_BATCH)
    plan = ingest_orders.BatchPlan(args.value_schema, _registered(settings.orders_topic, ORDERS_READER_SCHEMA), {})
    return ingest_orders.column_lineage(plan.rows(batch, Observation("design-time")), batch, args)


def _supplier_stats(spark: SparkSession, settings: Settings) -> dict[str, Any]:
    args = _arguments(supplier_stats.parser(), job_specs.supplier_stats_job(settings, DESIGN_DAY))
    source = spark.createDataFrame([], job_specs.table_columns(LAKEHOUSE_ORDERS))
    return supplier_stats.column_lineage(
        supplier_stats.written(source, args.day), args.day, {_table(settings, "orders"): source}
    )


def _table(settings: Settings, name: str) -> str:
    """A table of the project's catalog as a Spark plan names the table it reads."""
    return f"table:{settings.catalog_name}.{settings.iceberg_namespace}.{name}"


def _suppliers_ingestion(spark: SparkSession, settings: Settings) -> dict[str, Any]:
    args = _arguments(ingest_suppliers.parser(), job_specs.suppliers_ingestion_job(settings))
    batch = spark.createDataFrame([], KAFKA_BATCH)
    decoder = transforms.SupplierDecoder(
        args.value_schema, _registered(settings.suppliers_topic, SUPPLIERS_AVRO_SCHEMA)
    )
    return ingest_suppliers.column_lineage(ingest_suppliers.written(decoder(batch)), batch, args)


def _daily_table(dataset: Dataset) -> Callable[[SparkSession, Settings], dict[str, Any]]:
    """The design of a ``DailyTable``: its transform over empty inputs of their declared columns."""

    def design(spark: SparkSession, settings: Settings) -> dict[str, Any]:
        args = _arguments(table_job.parser(), job_specs.table_job(settings, dataset, DESIGN_DAY))
        inputs = {
            _table(settings, DATASETS[key].table): spark.createDataFrame([], job_specs.table_columns(DATASETS[key]))
            for key in dataset.inputs
        }
        rows = table_job.written(table_job.transform_of(args.transform), list(inputs.values()), args.day)
        return table_job.column_lineage(rows, args.day, inputs)

    return design


DESIGNS: dict[str, Callable[[SparkSession, Settings], dict[str, Any]]] = {
    ARCHIVE.key: _archive,
    SUPPLIER_STATS_LIVE.key: _live_stats,
    LAKEHOUSE_ORDERS.key: _ingestion,
    SUPPLIER_STATS.key: _supplier_stats,
    LAKEHOUSE_SUPPLIERS.key: _suppliers_ingestion,
    **{d.key: _daily_table(d) for d in DATASETS.values() if d.computed_by is not None},
}


def _first_line(error: Exception) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def design_derivations(
    spark: SparkSession, settings: Settings, keys: Iterable[str] | None = None
) -> dict[str, Derivations | ObservationError]:
    """Per dataset (``keys``, default every one a Spark job writes) its job's derivations at design
    time, or why they cannot be made (the plan cannot be built, e.g. it reads a table that does not
    exist, or cannot be read)."""
    found: dict[str, Derivations | ObservationError] = {}
    for key in keys or DESIGNS:
        if key not in DESIGNS:
            raise ValueError(f"{key!r} is no dataset a Spark job writes: one of {', '.join(DESIGNS)}")
        try:
            found[key] = derivations_of(DESIGNS[key](spark, settings), settings)
        except ObservationError as error:
            found[key] = error
        except Exception as error:  # whatever stops Spark from planning the job is what the check reports
            found[key] = ObservationError(f"the job's plan cannot be made: {_first_line(error)}")
    return found


def design_gaps(spark: SparkSession, settings: Settings, keys: Iterable[str] | None = None) -> list[str]:
    """Every difference between the jobs' plans at design time and the designed lineage."""
    gaps = []
    for key, found in design_derivations(spark, settings, keys).items():
        if isinstance(found, ObservationError):
            gaps.append(f"{key}: {found}")
        else:
            gaps.extend(derivation_gaps(DATASETS[key], found, "the job's plan makes"))
    return gaps


def accept(spark: SparkSession, settings: Settings, keys: Iterable[str] | None = None) -> list[str]:
    """Write the jobs' design-time derivations (of ``keys``, default all) into the designed lineage;
    the keys whose derivations changed. Nothing is written when any cannot be made."""
    found = design_derivations(spark, settings, keys)
    failed = {key: error for key, error in found.items() if isinstance(error, ObservationError)}
    if failed:
        raise ObservationError("; ".join(f"{key}: {error}" for key, error in failed.items()))
    before = designed_lineage()
    made: Mapping[str, Derivations] = {key: d for key, d in found.items() if isinstance(d, Derivations)}
    after = {**before, **made}
    DESIGNED_LINEAGE.write_text(
        json.dumps({key: after[key].as_json() for key in sorted(after)}, indent=2, ensure_ascii=False) + "\n"
    )
    designed_lineage.cache_clear()
    return [key for key in made if key not in before or before[key].as_json() != made[key].as_json()]


@dataclass(frozen=True)
class Change:
    """One change a working tree makes to the designed lineage of a dataset: a column added, removed
    or derived otherwise (its derivation or the fields it reads), or the rows decided otherwise (a
    filter, join or key); with what it reaches downstream, and the checks that test it."""

    dataset: str
    column: str | None  # None: which rows there are, which reaches every column
    kind: str  # added, removed, changed
    before: list[str]
    after: list[str]
    reaches: list[str]  # "dataset.column" downstream
    assets: list[str]
    checks: list[str]

    def text(self) -> str:
        subject = f"{self.dataset}.{self.column}" if self.column else f"rows of {self.dataset}"
        lines = [f"{subject}: {self.kind}"]
        lines += [f"  - {line}" for line in self.before if line not in self.after]
        lines += [f"  + {line}" for line in self.after if line not in self.before]
        lines.append(f"  reaches: {', '.join(self.reaches) or 'nothing downstream'}")
        lines.append(f"  assets: {', '.join(self.assets)}")
        lines.append(f"  checks: {', '.join(self.checks) or '-'}")
        return "\n".join(lines)


def designed_at(ref: str) -> dict[str, Derivations]:
    """The designed lineage as checked in at the git revision ``ref`` (empty where it had none)."""
    path = DESIGNED_LINEAGE.relative_to(PROJECT_ROOT).as_posix()
    shown = subprocess.run(
        ["git", "show", f"{ref}:{path}"], cwd=PROJECT_ROOT, capture_output=True, text=True, check=False
    )
    if shown.returncode != 0:
        if subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd=PROJECT_ROOT
        ).returncode:
            raise ValueError(f"{ref!r} is no git revision of {PROJECT_ROOT}")
        return {}
    return {key: Derivations.from_json(data) for key, data in json.loads(shown.stdout).items()}


def _lines(derivations: Derivations | None, column: str | None) -> list[str]:
    """What a column's entry (or, for None, the rows' entry) of the designed lineage says, a line each."""
    if derivations is None:
        return []
    entry = derivations.as_json()
    if column is None:
        return list(entry["rows"])
    if column not in entry["columns"]:
        return []
    return [entry["columns"][column]["derivation"], *(f"reads {i}" for i in entry["columns"][column]["inputs"])]


def diff(spark: SparkSession, settings: Settings, base: str = "HEAD") -> tuple[list[Change], list[str]]:
    """What the working tree's jobs (their plans at design time) change in the designed lineage as
    checked in at ``base``: each change with what it reaches downstream; and the datasets whose plans
    cannot be made, with why."""
    before = designed_at(base)
    graph = declared_graph(settings)
    changes, failures = [], []
    for key, found in design_derivations(spark, settings).items():
        if isinstance(found, ObservationError):
            failures.append(f"{key}: {found}")
            continue
        old = before.get(key)
        columns = dict.fromkeys([*(old.columns if old else {}), *found.columns])
        for column in [*columns, None]:
            was, now = _lines(old, column), _lines(found, column)
            if was == now:
                continue
            kind = "added" if not was else "removed" if not now else "changed"
            answer = impact(graph, resolve(f"{key}.{column}" if column else key, settings), settings)
            own = [c.name for c in CHECKS.values() if c.dataset == key and (column is None or column in c.columns)]
            changes.append(
                Change(
                    key,
                    column,
                    kind,
                    was,
                    now,
                    sorted({hop.downstream for hop in answer.hops}),
                    sorted({key, *answer.assets}),
                    sorted({*own, *answer.checks, f"{LINEAGE_CHECK} of {key}"}),
                )
            )
    return changes, failures

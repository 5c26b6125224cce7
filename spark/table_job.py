"""Iceberg tables -> one day of an Iceberg table, computed by a transform the catalog names
(``lineage_assets.datasets.DailyTable``): the job of every dataset declared that way.

    spark-submit spark/table_job.py --transform spark.transforms:supplier_revenue \
        --input lakehouse.`default`.supplier_stats --input-as-of-day lakehouse.`default`.suppliers \
        --target lakehouse.`default`.supplier_revenue --columns 'bid_date date, ...' \
        --partition-column bid_date --day 2026-11-21 --reconcile revenue=0:total_price --report report.json

The transform is called with each input's rows, in the order given, and the day. An input is read
at one snapshot, reported: its current one, or (``--input-as-of-day``, a dimension) the one that was
current when the day ended; for a day not over yet its current one, for a day before the table's
first snapshot that first one. The run replaces exactly the day's rows, so re-runs and backfills
are idempotent. ``--reconcile OUT=I:COLUMN`` reports the sum of the written column OUT and of
input I's COLUMN over the day (its rows whose partition column is the day), which the asset checks.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lineage_assets.job_specs import PROGRESS_PREFIX, TableJobReport
from spark import lineage
from spark.support import reports, tables

CURRENT_READ, AS_OF_DAY = "current", "as of the day"
# Which state of an input a run read, as it reports it.
DAY_END, CURRENT, FIRST = "state at the day's end", "current state", "first state recorded, after the day"
ROWS_REPORTED = 500  # the written rows the report carries (a day of a daily table is small)


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--transform", required=True, help="module:function computing the day's rows")
    parser.add_argument(
        "--input", dest="inputs", action="append", default=[], type=lambda t: (t, CURRENT_READ), help="a table read"
    )
    parser.add_argument(
        "--input-as-of-day",
        dest="inputs",
        action="append",
        type=lambda t: (t, AS_OF_DAY),
        help="a table read as it stood when the day ended",
    )
    parser.add_argument("--target", required=True)
    parser.add_argument("--columns", required=True, help="the target's columns, as CREATE TABLE lists them")
    parser.add_argument("--partition-column", required=True, help="the target's day column")
    parser.add_argument("--day", type=dt.date.fromisoformat, required=True, help="UTC day to compute")
    parser.add_argument(
        "--reconcile",
        action="append",
        default=[],
        help="OUT=I:COLUMN: the day's sum of written column OUT against that of input I's COLUMN",
    )
    parser.add_argument("--report", required=True)
    return parser


def transform_of(name: str) -> Callable[..., DataFrame]:
    """The function ``module:function`` names."""
    module, _, function = name.partition(":")
    found = getattr(importlib.import_module(module), function, None)
    if not callable(found):
        raise ValueError(f"--transform {name}: {module} has no function {function!r}")
    return found


def written(transform: Callable[..., DataFrame], inputs: list[DataFrame], day: dt.date) -> DataFrame:
    """The rows the job writes for ``day``."""
    return transform(*inputs, day)


def column_lineage(rows: DataFrame, day: dt.date, inputs: dict[str, DataFrame] | None = None) -> dict:
    """The column lineage of ``rows`` (``spark/lineage.observe``), whose derivations name the run's day."""
    return lineage.observe(rows, inputs, parameters={"day": day})


def snapshot_as_of_day(history: list[tuple[int, int]], day: dt.date, now: dt.datetime) -> tuple[int | None, str]:
    """A table's snapshot as of ``day`` from its ``history`` (when each snapshot became current, in
    epoch milliseconds, and its id, oldest first) at ``now``: the one current when the day ended; its
    current one for a day not over; its first for a day before it. None: it has none."""
    if not history:
        return None, CURRENT
    day_end = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), dt.UTC)
    if now < day_end:
        return history[-1][1], CURRENT
    before = [snapshot for made_current_ms, snapshot in history if made_current_ms < day_end.timestamp() * 1000]
    return (before[-1], DAY_END) if before else (history[0][1], FIRST)


def history(spark: SparkSession, table: str) -> list[tuple[int, int]]:
    """When each snapshot of ``table``'s main line became current (epoch ms), and its id, oldest first."""
    rows = spark.sql(
        f"SELECT unix_millis(made_current_at) AS at, snapshot_id FROM {table}.history "
        "WHERE is_current_ancestor ORDER BY made_current_at"
    ).collect()
    return [(row.at, row.snapshot_id) for row in rows]


def read(spark: SparkSession, table: str, mode: str, day: dt.date) -> dict[str, Any]:
    """The snapshot of ``table`` the run reads, its schema, whose rows it holds and which state it is."""
    current = tables.current_snapshot_id(spark, table)
    if mode == AS_OF_DAY:
        snapshot, as_of = snapshot_as_of_day(history(spark, table), day, dt.datetime.now(dt.UTC))
    else:
        snapshot, as_of = current, CURRENT
    return {
        "snapshot_id": snapshot,
        "schema_id": tables.table_schema_id(spark, table) if snapshot else None,
        "data_snapshot_id": tables.data_snapshot_id(spark, table, snapshot),
        "as_of": as_of,
        "rows": tables.snapshot_records(spark, table, snapshot),
    }


def _json(value: Any) -> Any:
    return str(value) if isinstance(value, (Decimal, dt.date)) else value


def main() -> None:
    args = parser().parse_args()
    started = time.monotonic()
    spark = SparkSession.builder.getOrCreate()
    created = tables.create_table(spark, args.target, args.columns, args.partition_column)
    reads = [read(spark, table, mode, args.day) for table, mode in args.inputs]
    frames = [tables.table_as_of(spark, table, r["snapshot_id"]) for (table, _), r in zip(args.inputs, reads)]
    print(
        f"{PROGRESS_PREFIX}computing {args.day} from "
        + ", ".join(
            f"{table} at snapshot {r['snapshot_id']} ({r['as_of']})" for (table, _), r in zip(args.inputs, reads)
        ),
        flush=True,
    )
    rows = written(transform_of(args.transform), frames, args.day).persist()
    observed = column_lineage(rows, args.day)
    day_rows = F.col(args.partition_column) == F.lit(args.day)
    rows.writeTo(args.target).overwrite(day_rows)
    collected = rows.collect()
    sums = {}
    for reconciled in args.reconcile:
        column, _, source = reconciled.partition("=")
        index, _, source_column = source.partition(":")
        total = frames[int(index)].where(day_rows).agg(F.sum(source_column)).collect()[0][0]
        sums[column] = {"written": str(sum((r[column] for r in collected), Decimal(0))), "read": str(total or 0)}
    reports.write_report(
        args.report,
        TableJobReport,
        started,
        day=args.day.isoformat(),
        reads=reads,
        column_lineage=observed,
        rows_in=sum(r["rows"] or 0 for r in reads),
        rows_written=len(collected),
        table_created=created,
        **tables.committed(spark, args.target),
        rows=[{k: _json(v) for k, v in r.asDict().items()} for r in collected[:ROWS_REPORTED]],
        sums=sums,
    )
    spark.stop()


if __name__ == "__main__":
    main()

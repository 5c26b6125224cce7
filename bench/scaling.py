"""Batch scaling: `supplier_stats` on one day of 1, 4 and 16 million orders, the asset materialized
through Dagster (lineage on) against a bare spark-submit of the same job (the floor), alternately;
the ratio per size and the growth exponent (slope of log time against log size).

The days are written straight into the Iceberg `orders` table by a Spark job (bench/synthetic_orders.py):
pushing 16 million orders through Kafka would take longer than the benchmark itself.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable
from typing import Any

from bench.measure import alternate, growth_exponent, median, rounded, wall_seconds
from bench.supplier_stats_runs import bare_submit, materialize
from lineage_assets.datasets import iceberg_table_name
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.resources.spark_jobs import SparkJobsResource

FULL_SIZES = (1_000_000, 4_000_000, 16_000_000)
QUICK_SIZES = (10_000, 160_000)  # two sizes give an exponent; quick mode must stay short
SYNTHETIC_ORDERS_JOB = "bench/synthetic_orders.py"
ROUNDS = (
    3  # alternated pairs per size in a full run: one pair spread by ±10% (a 16-million-order run takes about 13 s here)
)
TARGET_RATIO = 1.10  # the asset against the bare job, at the largest size


def day_for(size: int) -> str:
    """One day per size (numbered by log2 of the size from 2025-01-01: a past day, as the asset's
    partitions end today), so the quick and full days stay side by side in the table and each is
    generated once per bench state."""
    return (dt.date(2025, 1, 1) + dt.timedelta(days=round(math.log2(size)))).isoformat()


def fill_days(spark_jobs: SparkJobsResource, sizes: tuple[int, ...]) -> dict:
    """Each size's day in the orders table, generated if missing; ``generated`` says how many orders each
    day got. The days filled are recorded in the bench state (which holds the table, and goes with it),
    so the Spark job runs only when one is missing: the benchmarks share days."""
    settings = spark_jobs.environment.settings
    table = iceberg_table_name(settings, "orders")
    record = settings.state_dir / "bench-days.json"
    filled = json.loads(record.read_text()) if record.exists() else {}
    missing = [size for size in sizes if filled.get(f"{table} {day_for(size)}") != size]
    generated = {day_for(size): 0 for size in sizes}
    if missing:
        days = [argument for size in missing for argument in ("--day", f"{day_for(size)}={size}")]
        generated |= spark_jobs.submit(SYNTHETIC_ORDERS_JOB, ["--table", table, *days])["generated"]
        record.write_text(json.dumps(filled | {f"{table} {day_for(size)}": size for size in missing}))
    return {"generated": generated}


def day_sizes(quick: bool, sizes: tuple[int, ...] | None = None) -> tuple[int, ...]:
    return tuple(sizes or (QUICK_SIZES if quick else FULL_SIZES))


def floor_and_asset(
    spark_jobs: SparkJobsResource, environment: SettingsResource, day: str
) -> dict[str, Callable[[int], float]]:
    """The subjects measured on one day: the bare job and the asset."""
    return {
        "floor": wall_seconds(lambda _: bare_submit(spark_jobs, day)),
        "asset": wall_seconds(lambda _: materialize(environment, day)),
    }


def run(environment: SettingsResource, quick: bool, sizes: tuple[int, ...] | None = None) -> dict:
    sizes, rounds = day_sizes(quick, sizes), 1 if quick else ROUNDS
    spark_jobs = SparkJobsResource(environment=environment)
    filled = fill_days(spark_jobs, sizes)
    measured: list[dict[str, Any]] = []  # per size, as the result reports it
    for size in sizes:
        day = day_for(size)
        timings = alternate(rounds, floor_and_asset(spark_jobs, environment, day))
        floor, asset = median(timings["floor"]), median(timings["asset"])
        measured.append(
            {
                "orders": size,
                "day": day,
                "median_floor_s": floor,
                "median_asset_s": asset,
                "ratio": round(asset / floor, 4),
                "timings_s": rounded(timings),
            }
        )
    return {
        "name": "batch_scaling",
        "target": f"asset <= {TARGET_RATIO}x bare at {sizes[-1]:,} orders; exponents reported",
        "met": measured[-1]["ratio"] <= TARGET_RATIO,
        "rounds": rounds,
        "generated": filled["generated"],
        "sizes": measured,
        "exponent_floor": round(growth_exponent(list(sizes), [m["median_floor_s"] for m in measured]), 3),
        "exponent_asset": round(growth_exponent(list(sizes), [m["median_asset_s"] for m in measured]), 3),
    }


def summary(result: dict) -> str:
    sizes = ", ".join(
        f"{m['orders']:,}: {m['median_asset_s']} s vs {m['median_floor_s']} s (ratio {m['ratio']})"
        for m in result["sizes"]
    )
    return (
        f"asset vs bare spark-submit per day of orders: {sizes}; growth exponent "
        f"{result['exponent_asset']} (asset), {result['exponent_floor']} (floor)"
    )

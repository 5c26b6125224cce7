"""A bad deploy of the ingestion, found and repaired through the lineage, on a pipeline of its own.

The ingestion runs once with a change that doubles one supplier's prices, which its review let through
(its derivation accepted into the designed lineage, so no lineage check holds it back; unreviewed, the
blocking `lineage_matches_catalog` would keep the daily totals from it). `lineage reached` on that
run lists exactly the `supplier_stats` days computed from its snapshot; the owner then rebuilds the
table with the fixed ingestion (dropped with its checkpoint and ingested again from the topic, which
keeps every record), and `lineage reached --rematerialize` rebuilds those days through a Dagster
backfill and no others. The figures are held against the records their provenance names, put
through the jobs' own transforms again.
"""

from __future__ import annotations

import os
import shutil
import textwrap
from pathlib import Path

import dagster as dg
import pytest

from lineage_assets import column_lineage, datasets
from lineage_assets.assets.common import asset_key
from lineage_assets.datasets import LAKEHOUSE_ORDERS, SUPPLIER_STATS, iceberg_table_name
from lineage_assets.definitions import build_definitions
from lineage_assets.instance import prepare_dagster_home
from lineage_assets.job_specs import checkpoint
from lineage_assets.lineage import design_time
from lineage_assets.lineage.check import check
from lineage_assets.lineage.emitter import emitter_for
from lineage_assets.lineage.provenance import provenance, reached
from lineage_assets.lineage.run_records import runs_of
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.testing import pipeline_of_its_own
from spark import transforms
from tests.provenance_checks import completed, offsets_behind, recomputed_day, written_day
from tests.ui.dagster_dev import dagster_dev, rematerialize_reached, stop_sensor

SUPPLIER = "Alice"
FIRST_DAY, SECOND_DAY, THIRD_DAY = "2026-11-10", "2026-11-11", "2026-11-12"
# Four minutes of orders across each midnight: the good run writes the first two days, the bad one the last two.
GOOD = {"count": 240, "seed": 31, "start": "2026-11-10T23:58:00+00:00"}
BAD = {"count": 240, "seed": 32, "start": "2026-11-11T23:58:00+00:00"}

# The bad deploy: every process started with this folder on its path doubles SUPPLIER's prices on
# their way into the table (Python runs `sitecustomize` at start; the Spark jobs' drivers are such processes).
DOUBLING = f"""
try:
    from pyspark.sql import functions as F

    from spark import transforms
except ImportError:  # a process without the project's Spark code
    transforms = None

if transforms is not None:
    correct = transforms.iceberg_orders

    def iceberg_orders(valid):
        rows = correct(valid)
        doubled = F.when(F.col("supplier") == {SUPPLIER!r}, F.col("price") * 2).otherwise(F.col("price"))
        return rows.withColumn("price", doubled.cast(rows.schema["price"].dataType))

    transforms.iceberg_orders = iceberg_orders
"""


def accept_the_doubling(spark, settings, folder: Path, patch: pytest.MonkeyPatch) -> None:
    """The bad deploy as its review let it through: its derivation accepted into (a copy of) the designed
    lineage, so no lineage check stops it and the daily totals are computed from it. What it reached is
    then found through provenance."""
    copy = folder / "designed_lineage.json"
    copy.write_text(column_lineage.DESIGNED_LINEAGE.read_text())
    for module in (column_lineage, design_time):
        patch.setattr(module, "DESIGNED_LINEAGE", copy)
    with pytest.MonkeyPatch.context() as doubled:
        doubled.setattr(transforms, "iceberg_orders", transforms.iceberg_orders)  # restored after the exec
        exec(textwrap.dedent(DOUBLING), {})  # the same change as the bad deploy's processes make
        assert design_time.accept(spark, settings, [LAKEHOUSE_ORDERS.key]) == [LAKEHOUSE_ORDERS.key]


def written_days(event: dict) -> list[str]:
    return event["outputs"][0].get("outputFacets", {}).get("partitionsWritten", {}).get("partitions", [])


def ingestions(settings) -> list[dict]:
    """The completed ingestion runs that wrote rows, oldest first."""
    return [event for event in completed(settings, LAKEHOUSE_ORDERS) if written_days(event)]


def stats_days_after(settings, event: dict) -> list[str]:
    """The days of the `supplier_stats` runs that completed after ``event``, in order."""
    log = emitter_for(settings).events()
    later = log[log.index(event) + 1 :]
    return [day for stats in completed(settings, SUPPLIER_STATS) if stats in later for day in written_days(stats)]


def column_lineage_gaps(settings) -> list[str]:
    """The lineage check's column lineage gaps over the pipeline's log, without their run ids."""
    gaps = check(emitter_for(settings).events(), settings)
    return [gap.split(" (run ")[0] for gap in gaps if gap.startswith("column lineage")]


def materialize(environment: SettingsResource, instance, dataset, **options) -> None:
    """``dataset``'s asset, with its checks."""
    definitions = build_definitions(environment)
    result = dg.materialize(
        [*definitions.assets, *definitions.asset_checks],
        instance=instance,
        selection=[asset_key(dataset)],
        resources=definitions.resources,
        **options,
    )
    assert result.success


def ingest(environment: SettingsResource, instance, orders: dict, days: list[str]) -> None:
    """A pass of the pipeline as far as this story goes: the orders produced and ingested, then ``days``
    of `supplier_stats` (the archive and the live statistics play no part in it)."""
    materialize(
        environment, instance, datasets.ORDERS, run_config={"ops": {datasets.ORDERS.node_name: {"config": orders}}}
    )
    materialize(environment, instance, LAKEHOUSE_ORDERS)
    for day in days:
        materialize(environment, instance, SUPPLIER_STATS, partition_key=day)


def day_of(settings, day: str) -> dict:
    return provenance(runs_of(emitter_for(settings).events()), SUPPLIER_STATS, settings, partition=day).as_dict()


def test_a_wrong_ingestion_reaches_exactly_its_days_and_only_those_are_rebuilt_after_the_fix(
    stack, settings, spark, tmp_path
):
    own = pipeline_of_its_own(settings, "wrong-ingestion")
    home = prepare_dagster_home(own, tmp_path)
    # The owner stops the automatic follow-up while repairing: the backfill alone rebuilds.
    stop_sensor(own, home, "supplier_stats_on_new_orders")
    bad_deploy = tmp_path / "bad-deploy"
    bad_deploy.mkdir()
    (bad_deploy / "sitecustomize.py").write_text(textwrap.dedent(DOUBLING))
    environment = SettingsResource.of(own)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        ingest(environment, instance, GOOD, [FIRST_DAY, SECOND_DAY])
        with pytest.MonkeyPatch.context() as patch:
            accept_the_doubling(spark, own, tmp_path, patch)
            patch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(bad_deploy), os.environ.get("PYTHONPATH")])))
            ingest(environment, instance, BAD, [SECOND_DAY, THIRD_DAY])
        column_lineage.designed_lineage.cache_clear()  # the design as checked in again, which the fix keeps to
        *_, bad = ingestions(own)
        assert written_days(bad) == [SECOND_DAY, THIRD_DAY]
        bad_run = bad["run"]["runId"]
        # The lineage check names the bad deploy: the same inputs, price computed another way, both derivations.
        gaps = column_lineage_gaps(own)
        price = f"column lineage of {LAKEHOUSE_ORDERS.key}.price from orders."
        assert gaps and all(gap.startswith(price) for gap in gaps), gaps
        designed = LAKEHOUSE_ORDERS.designed.columns["price"]
        assert any(
            gap.startswith(f"{price}price: the catalog says DIRECT/TRANSFORMATION ({designed})")
            and f"Spark ran DIRECT/TRANSFORMATION (cast(CASE WHEN (orders.supplier = {SUPPLIER}) THEN" in gap
            for gap in gaps
        ), gaps

        # What the bad run reached: the two days computed from its snapshot, not the first day.
        answer = reached(runs_of(emitter_for(own).events()), bad_run, own)
        assert answer.partitions() == {SUPPLIER_STATS.key: [SECOND_DAY, THIRD_DAY]}
        before = {day: day_of(own, day) for day in (FIRST_DAY, SECOND_DAY, THIRD_DAY)}
        for day in (SECOND_DAY, THIRD_DAY):  # wrong, and wrong only in SUPPLIER's figures
            written = written_day(spark, own, before[day]["made_by"][0]["wrote"]["version"], day)
            recomputed = recomputed_day(spark, own, offsets_behind(before[day]), day)
            assert {row.supplier for row in set(written) ^ set(recomputed)} == {SUPPLIER}, day

        # The fix: the table rebuilt from the topic by the corrected ingestion.
        spark.sql(f"DROP TABLE {iceberg_table_name(own, 'orders')} PURGE")
        shutil.rmtree(checkpoint(own, LAKEHOUSE_ORDERS))
        materialize(environment, instance, LAKEHOUSE_ORDERS)
        *_, fix = ingestions(own)
        assert column_lineage_gaps(own) == []  # what ran last is the catalog's price again
        assert fix["outputs"][0]["outputFacets"]["icebergSnapshot"].get("parentSnapshotId") is None  # a new table

        # `dagster dev` only for the backfill: its daemon would spend the runs above polling sensors.
        with dagster_dev(own, home) as url:
            backfill, line = rematerialize_reached(url, own, bad_run)
        assert line.split(": ", 1)[1].startswith(f"{SUPPLIER_STATS.key} {SECOND_DAY}, {THIRD_DAY} ")
        backfill_runs = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/backfill": backfill}))
        assert sorted(run.tags["dagster/partition"] for run in backfill_runs) == [SECOND_DAY, THIRD_DAY]

    # Exactly those days were computed again, from the fixed table, and are right to the cent.
    assert sorted(stats_days_after(own, fix)) == [SECOND_DAY, THIRD_DAY]
    for day in (SECOND_DAY, THIRD_DAY):
        after = day_of(own, day)
        (stats,) = after["made_by"]
        assert stats["run"] != before[day]["made_by"][0]["run"]
        assert [step["run"] for step in stats["read"][0]["made_by"]] == [fix["run"]["runId"]]
        assert written_day(spark, own, stats["wrote"]["version"], day) == recomputed_day(
            spark, own, offsets_behind(after), day
        )
    assert day_of(own, FIRST_DAY)["made_by"][0]["run"] == before[FIRST_DAY]["made_by"][0]["run"]
    # The bad run's reach is what it was: what the fixed table fed is not its.
    again = reached(runs_of(emitter_for(own).events()), bad_run, own)
    assert [run.run_id for run, _ in again.downstream] == [run.run_id for run, _ in answer.downstream]

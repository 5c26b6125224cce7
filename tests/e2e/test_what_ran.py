"""Column lineage is what ran: a copy of a job whose derivation of one column changed, run on the test
stack through the real asset, is a gap that names that column with both derivations, and Marquez then
shows the derivation that ran. The real job runs again after each, and openlineage-spark, the witness
of the batch job's own plan, agrees with it there."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import pytest

from lineage_assets.assets.common import asset_key
from lineage_assets.assets.lakehouse import days_behind
from lineage_assets.datasets import DATASETS, LAKEHOUSE_ORDERS, ORDERS, SUPPLIER_STATS, Dataset
from lineage_assets.demo import run_pipeline
from lineage_assets.generator import GeneratorConfig, generate_orders, produce_orders
from lineage_assets.lineage.check import check, check_marquez
from lineage_assets.lineage.emitter import emitter_for
from lineage_assets.resources.settings import SettingsResource
from tests.e2e.conftest import DELIVERY_TIMEOUT_S, lineage_check_of, materialize
from tests.suite import SHARED_PIPELINE

pytestmark = pytest.mark.xdist_group(SHARED_PIPELINE)  # the test stack's own topics, tables and lineage

# A job with one change a careless edit would make, applied to one of its transforms.
CHANGED_JOB = """
from pyspark.sql import functions as F

from spark import {module}, transforms

original = transforms.{transform}
transforms.{transform} = lambda frame: {change}
{module}.main()
"""


@dataclass(frozen=True)
class Mutation:
    dataset: Dataset  # the asset whose job is changed
    transform: str  # the function of spark/transforms.py replaced
    change: str  # its replacement's body, over `frame` (`original`: the function as it was)
    column: str  # the output column whose derivation changes
    source: Dataset
    ran: tuple[str, str, str]  # the input field the changed job reads the column from, how, its derivation
    no_longer: tuple[str, str]  # the input field and how the designed lineage reads it instead

    @property
    def designed(self) -> str:
        """The column's derivation in the designed lineage."""
        designed = self.dataset.designed
        assert designed is not None
        return designed.columns[self.column]

    def script(self, folder: Path) -> str:
        module = Path(self.dataset.job.source).stem
        path = folder / f"changed_{module}.py"
        path.write_text(CHANGED_JOB.format(module=module, transform=self.transform, change=self.change))
        return str(path)


MUTATIONS = {
    "total over another column": Mutation(
        SUPPLIER_STATS,
        "hourly_supplier_stats",
        'original(frame.withColumn("price", F.length("item").cast("decimal(10,2)")))',
        "total_price",
        LAKEHOUSE_ORDERS,
        (
            "item",
            "DIRECT/AGGREGATION",
            "cast(sum(cast(length(lakehouse/orders.item) as decimal(10,2))) as decimal(10,2))",
        ),
        ("price", "DIRECT/AGGREGATION"),
    ),
    # Spark's store assignment still writes a zone-less timestamp; the job's own plan no longer converts.
    "cast removed": Mutation(
        LAKEHOUSE_ORDERS,
        "iceberg_orders",
        "frame.select(*transforms.ICEBERG_ORDER_COLUMNS)",
        "bid_time",
        ORDERS,
        ("bid_time", "DIRECT/IDENTITY", "orders.bid_time"),
        ("bid_time", "DIRECT/TRANSFORMATION"),
    ),
}
NEW_ORDERS = dt.datetime(2026, 11, 22, 8, tzinfo=dt.UTC)


def new_orders(settings, seed: int) -> None:
    """Orders of the ingestion's run of its own (``seed``), a day after the test stack's."""
    orders = list(generate_orders(GeneratorConfig(count=20, seed=seed, start=NEW_ORDERS)))
    produce_orders(orders, settings)


@pytest.mark.parametrize("mutation", MUTATIONS.values(), ids=MUTATIONS.keys())
def test_a_changed_derivation_is_a_gap_of_that_column_and_marquez_shows_what_ran(
    runs, marquez, settings, instance, tmp_path, mutation
):
    events = emitter_for(settings)
    assert check(events.events(), settings) == []  # the real jobs ran as the catalog expects
    if mutation.dataset is LAKEHOUSE_ORDERS:
        new_orders(settings, seed=31)
    result = materialize(settings, instance, mutation.dataset, mutation.script(tmp_path))
    # Written, then held by its lineage check: blocking where other assets are computed from it.
    assert not lineage_check_of(result).passed
    assert result.success == (not any(mutation.dataset.key in other.upstream for other in DATASETS.values()))
    node = "__".join(mutation.dataset.asset_key_path)
    # The materialization shows the lineage that ran, the definition keeps the expectation.
    (materialization,) = result.asset_materializations_for_node(node)
    deps = materialization.metadata["dagster/column_lineage"].value.deps_by_column[mutation.column]
    assert (asset_key(mutation.source), mutation.ran[0]) in {(dep.asset_key, dep.column_name) for dep in deps}

    gaps = check(events.events(), settings)
    name, source = mutation.dataset.key, mutation.source.key
    prefix = f"column lineage of {name}.{mutation.column} from {source}."
    assert all(gap.startswith(f"column lineage of {name}.") for gap in gaps), gaps
    (field, how, derivation), (designed_field, designed_how) = mutation.ran, mutation.no_longer
    # Each gap names both derivations: the designed one and the one that ran.
    assert any(gap.startswith(f"{prefix}{field}:") and f"Spark ran {how} ({derivation})" in gap for gap in gaps), gaps
    assert any(
        gap.startswith(f"{prefix}{designed_field}: the catalog says {designed_how} ({mutation.designed})")
        for gap in gaps
    ), gaps

    assert events.flush(timeout=DELIVERY_TIMEOUT_S)
    # The newest version of the dataset in Marquez holds the derivation that ran (the run's COMPLETE wrote
    # it; its START's, of the designed schema, may be Marquez's current one). Marquez's column-lineage
    # graph also keeps every pair it was ever sent, and answers a field with one of its versions: not asserted.
    written = marquez.newest_written_version(*mutation.dataset.identity(settings).node)
    facet = written["facets"]["columnLineage"]
    shown = {(field["name"], field["field"]): kinds(field) for field in facet["fields"][mutation.column]["inputFields"]}
    table = mutation.source.identity(settings).name
    assert f"{how} ({derivation})" in shown.get((table, field), "")
    if field != designed_field:
        assert (table, designed_field) not in shown
    assert [gap for gap in check_marquez(marquez, settings) if gap.startswith("column lineage")] == [
        gap.rsplit(" (run ", 1)[0] for gap in gaps
    ]  # Marquez's current version holds what the log holds

    # The real job again: what ran is again what the catalog expects, in the log and in Marquez.
    if mutation.dataset is LAKEHOUSE_ORDERS:
        new_orders(settings, seed=37)
    restored = materialize(settings, instance, mutation.dataset)
    assert restored.success
    assert check(events.events(), settings) == []
    assert events.flush(timeout=DELIVERY_TIMEOUT_S)
    assert not [gap for gap in check_marquez(marquez, settings) if gap.startswith("column lineage")]
    assert not [
        entry for entry in instance.all_logs(restored.run_id) if "differs from the job's plan" in entry.user_message
    ]


def kinds(field: dict) -> str:
    """An input field's transformations as a gap names them (a DIRECT one with its description)."""
    return ", ".join(
        sorted(
            f"{t['type']}/{t['subtype']}" + (f" ({t['description']})" if t["type"] == "DIRECT" else "")
            for t in field["transformations"]
        )
    )


def test_a_day_no_rebuild_followed_is_rebuilt_by_the_next_pass(runs, settings, instance):
    """An ingestion that released a day, and no `supplier_stats` run after it (it failed, or the pass
    stopped): the next pass of the pipeline rebuilds that day, new orders or not."""
    left_behind = dt.datetime(2026, 11, 23, 9, tzinfo=dt.UTC)
    orders = list(generate_orders(GeneratorConfig(count=30, seed=41, start=left_behind)))
    produce_orders(orders, settings)
    assert materialize(settings, instance, LAKEHOUSE_ORDERS).success  # the pass stops here
    assert "2026-11-23" in days_behind(instance)

    again = run_pipeline(SettingsResource.of(settings), instance, None)
    assert "2026-11-23" in again.days and days_behind(instance) == []
    totals: dict[str, tuple[Decimal, int]] = {}
    for order in orders:
        total, count = totals.get(order.order["supplier"], (Decimal("0"), 0))
        totals[order.order["supplier"]] = (total + Decimal(order.order["price"]), count + 1)
    assert again.supplier_totals["2026-11-23"] == totals

"""Column lineage is what ran: a copy of the batch job whose derivation of one column changed, run on
the test stack through the real asset, is a gap that names that column with both derivations, and
Marquez then shows the derivation that ran. The real job runs again at the end, and openlineage-spark,
the witness of the batch job's own plan, agrees with it there."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
from lineage_assets.assets.common import asset_key
from lineage_assets.datasets import LAKEHOUSE_ORDERS, SUPPLIER_STATS
from lineage_assets.definitions import build_definitions
from lineage_assets.jobs import JobSpec
from lineage_assets.lineage.check import check, check_marquez
from lineage_assets.lineage.emitter import emitter_for
from lineage_assets.resources.settings import SettingsResource
from tests.e2e.conftest import DELIVERY_TIMEOUT_S

DAY = "2026-11-21"
# The batch job with its group-by key `supplier` taken from `item`, as a careless change would.
GROUPED_BY_ITEM = '''
from pyspark.sql import functions as F

from spark import supplier_stats, transforms

hourly = transforms.hourly_supplier_stats
transforms.hourly_supplier_stats = lambda orders: hourly(orders.withColumn("supplier", F.col("item")))
supplier_stats.main()
'''


def materialize(settings, instance) -> dg.ExecuteInJobResult:
    definitions = build_definitions(SettingsResource.of(settings))
    return dg.materialize([*definitions.assets], instance=instance, selection=[asset_key(SUPPLIER_STATS)],
                          partition_key=DAY, resources=definitions.resources)


def test_a_changed_group_by_is_a_gap_of_that_column_and_marquez_shows_what_ran(runs, marquez, settings, instance,
                                                                              tmp_path, monkeypatch):
    events = emitter_for(settings)
    assert check(events.events(), settings) == []  # the real jobs ran as the catalog expects
    script = tmp_path / "supplier_stats_by_item.py"
    script.write_text(GROUPED_BY_ITEM)
    with monkeypatch.context() as patched:
        patched.setattr(JobSpec, "script", property(lambda spec: str(script) if spec.dataset is SUPPLIER_STATS else spec.dataset.job.source))
        result = materialize(settings, instance)
    assert result.success
    # The materialization shows the lineage that ran, the definition keeps the expectation.
    (materialization,) = result.asset_materializations_for_node("lakehouse__supplier_stats")
    deps = materialization.metadata["dagster/column_lineage"].value.deps_by_column["supplier"]
    assert {(dep.asset_key, dep.column_name) for dep in deps} >= {(asset_key(LAKEHOUSE_ORDERS), "item")}

    gaps = check(events.events(), settings)
    assert gaps and all(gap.startswith("column lineage of lakehouse/supplier_stats.") for gap in gaps), gaps
    supplier = [gap for gap in gaps if gap.startswith("column lineage of lakehouse/supplier_stats.supplier from")]
    assert any(gap.startswith("column lineage of lakehouse/supplier_stats.supplier from lakehouse/orders.item: "
                              "the catalog says nothing (an extra source), Spark ran DIRECT/IDENTITY") for gap in supplier), gaps
    assert any(gap.startswith("column lineage of lakehouse/supplier_stats.supplier from lakehouse/orders.supplier: "
                              "the catalog says DIRECT/IDENTITY, INDIRECT/GROUP_BY, Spark ran nothing") for gap in supplier), gaps

    assert events.flush(timeout=DELIVERY_TIMEOUT_S)
    stats = SUPPLIER_STATS.identity(settings)
    shown = {(source["dataset"], source["field"])
             for node in marquez.column_lineage(stats.namespace, stats.name, "supplier")["graph"]
             if node["data"]["dataset"] == stats.name and node["data"]["field"] == "supplier"
             for source in node["data"]["inputFields"]}
    table = LAKEHOUSE_ORDERS.identity(settings).name
    assert (table, "item") in shown and (table, "supplier") not in shown
    assert [gap for gap in check_marquez(marquez, settings) if gap.startswith("column lineage")] == [
        gap.rsplit(" (run ", 1)[0] for gap in gaps]  # Marquez's current version holds what the log holds

    # The real job again: what ran is again what the catalog expects, in the log and in Marquez.
    restored = materialize(settings, instance)
    assert restored.success
    assert check(events.events(), settings) == []
    assert events.flush(timeout=DELIVERY_TIMEOUT_S)
    assert not [gap for gap in check_marquez(marquez, settings) if gap.startswith("column lineage")]
    assert not [entry for entry in instance.all_logs(restored.run_id) if "differs from the job's plan" in entry.user_message]

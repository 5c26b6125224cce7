"""Column lineage is what ran: a copy of the batch job whose derivation of one column changed, run on
the test stack through the real asset, is a gap that names that column with both derivations, and
Marquez then shows the derivation that ran. The real job runs again after each, and openlineage-spark,
the witness of the batch job's own plan, agrees with it there. (A cast removed is a unit test of the
ingestion's plan: on the stack it would write the shared table with another column type.)"""

from __future__ import annotations

import dagster as dg
import pytest

from lineage_assets.assets.common import asset_key
from lineage_assets.datasets import LAKEHOUSE_ORDERS, SUPPLIER_STATS
from lineage_assets.definitions import build_definitions
from lineage_assets.jobs import JobSpec
from lineage_assets.lineage.check import check, check_marquez
from lineage_assets.lineage.emitter import emitter_for
from lineage_assets.resources.settings import SettingsResource
from tests.e2e.conftest import DELIVERY_TIMEOUT_S

DAY = "2026-11-21"
# The batch job with one change a careless edit would make, applied to its transform.
CHANGED_JOB = '''
from pyspark.sql import functions as F

from spark import supplier_stats, transforms

hourly = transforms.hourly_supplier_stats
transforms.hourly_supplier_stats = lambda orders: hourly({change})
supplier_stats.main()
'''


def materialize(settings, instance) -> dg.ExecuteInJobResult:
    definitions = build_definitions(SettingsResource.of(settings))
    return dg.materialize([*definitions.assets], instance=instance, selection=[asset_key(SUPPLIER_STATS)],
                          partition_key=DAY, resources=definitions.resources)


@pytest.mark.parametrize("change, column, ran, no_longer", [
    # The group-by key `supplier` taken from `item`.
    ('orders.withColumn("supplier", F.col("item"))', "supplier", ("item", "DIRECT/IDENTITY, INDIRECT/GROUP_BY"),
     ("supplier", "DIRECT/IDENTITY, INDIRECT/GROUP_BY")),
    # The total summed over another column.
    ('orders.withColumn("price", F.length("item").cast("decimal(10,2)"))', "total_price",
     ("item", "DIRECT/AGGREGATION"), ("price", "DIRECT/AGGREGATION")),
])
def test_a_changed_derivation_is_a_gap_of_that_column_and_marquez_shows_what_ran(
        runs, marquez, settings, instance, tmp_path, monkeypatch, change, column, ran, no_longer):
    events = emitter_for(settings)
    assert check(events.events(), settings) == []  # the real jobs ran as the catalog expects
    script = tmp_path / "changed_supplier_stats.py"
    script.write_text(CHANGED_JOB.format(change=change))
    with monkeypatch.context() as patched:
        patched.setattr(JobSpec, "script", property(lambda spec: str(script) if spec.dataset is SUPPLIER_STATS else spec.dataset.job.source))
        result = materialize(settings, instance)
    assert result.success
    # The materialization shows the lineage that ran, the definition keeps the expectation.
    (materialization,) = result.asset_materializations_for_node("lakehouse__supplier_stats")
    deps = materialization.metadata["dagster/column_lineage"].value.deps_by_column[column]
    assert (asset_key(LAKEHOUSE_ORDERS), ran[0]) in {(dep.asset_key, dep.column_name) for dep in deps}

    gaps = check(events.events(), settings)
    prefix = f"column lineage of lakehouse/supplier_stats.{column} from lakehouse/orders."
    assert all(gap.startswith("column lineage of lakehouse/supplier_stats.") for gap in gaps), gaps
    assert any(gap.startswith(f"{prefix}{ran[0]}: the catalog says nothing (an extra source), Spark ran {ran[1]}")
               for gap in gaps), gaps
    assert any(gap.startswith(f"{prefix}{no_longer[0]}: the catalog says {no_longer[1]}") for gap in gaps), gaps

    assert events.flush(timeout=DELIVERY_TIMEOUT_S)
    # Marquez's dataset (its current version) holds the derivation that ran. Its column-lineage graph
    # also keeps every pair it was ever sent, and answers a field with one of its versions: not asserted.
    facet = marquez.dataset(*SUPPLIER_STATS.identity(settings).node)["facets"]["columnLineage"]
    shown = {(source["name"], source["field"]) for source in facet["fields"][column]["inputFields"]}
    table = LAKEHOUSE_ORDERS.identity(settings).name
    assert (table, ran[0]) in shown and (table, no_longer[0]) not in shown
    assert [gap for gap in check_marquez(marquez, settings) if gap.startswith("column lineage")] == [
        gap.rsplit(" (run ", 1)[0] for gap in gaps]  # Marquez's current version holds what the log holds

    # The real job again: what ran is again what the catalog expects, in the log and in Marquez.
    restored = materialize(settings, instance)
    assert restored.success
    assert check(events.events(), settings) == []
    assert events.flush(timeout=DELIVERY_TIMEOUT_S)
    assert not [gap for gap in check_marquez(marquez, settings) if gap.startswith("column lineage")]
    assert not [entry for entry in instance.all_logs(restored.run_id) if "differs from the job's plan" in entry.user_message]

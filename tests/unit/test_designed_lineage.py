"""The designed lineage as reviewed code: `lineage accept` writes what the jobs' plans compute into it,
`lineage diff` says what a working-tree change does to it and what that reaches downstream, and
`lineage check --design` holds the code against it, all without a stack."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from pyspark.sql import functions as F

from lineage_assets import column_lineage
from lineage_assets.datasets import SUPPLIER_STATS
from lineage_assets.lineage import design_time
from lineage_assets.settings import PROJECT_ROOT
from lineage_assets.settings_environment import settings_from_env
from spark import transforms

SETTINGS = settings_from_env({})
DESIGNED_TOTAL = "cast(sum(lakehouse/orders.price) as decimal(10,2))"


@pytest.fixture
def designed_copy(tmp_path, monkeypatch):
    """The designed lineage in a copy of its own, which `accept` may write."""
    copy = tmp_path / "designed_lineage.json"
    copy.write_text(column_lineage.DESIGNED_LINEAGE.read_text())
    for module in (column_lineage, design_time):
        monkeypatch.setattr(module, "DESIGNED_LINEAGE", copy)
    column_lineage.designed_lineage.cache_clear()
    yield copy
    column_lineage.designed_lineage.cache_clear()


def test_a_changed_derivation_is_one_reviewed_change_that_accept_writes(spark, designed_copy, monkeypatch):
    hourly = transforms.hourly_supplier_stats

    def hourly_distinct(orders):
        with monkeypatch.context() as patched:
            patched.setattr(F, "sum", F.sum_distinct)
            return hourly(orders)

    monkeypatch.setattr(transforms, "hourly_supplier_stats", hourly_distinct)
    before = json.loads(designed_copy.read_text())
    assert design_time.design_gaps(spark, SETTINGS) != []
    assert design_time.accept(spark, SETTINGS, [SUPPLIER_STATS.key]) == [SUPPLIER_STATS.key]
    after = json.loads(designed_copy.read_text())
    # One entry of the file changed, the one line of the derivation: the diff a reviewer sees.
    assert {key for key in before if before[key] != after[key]} == {SUPPLIER_STATS.key}
    total = after[SUPPLIER_STATS.key]["columns"]["total_price"]
    assert total["derivation"] == "cast(sum(distinct lakehouse/orders.price) as decimal(10,2))"
    assert before[SUPPLIER_STATS.key]["columns"]["total_price"]["derivation"] == DESIGNED_TOTAL
    assert design_time.design_gaps(spark, SETTINGS) == []  # the code is now the design
    assert design_time.accept(spark, SETTINGS) == []


def test_accept_writes_nothing_when_a_plan_cannot_be_made(spark, designed_copy, monkeypatch):
    monkeypatch.setattr(transforms, "orders_of_day", lambda orders, day: orders.sparkSession.table("nowhere.orders"))
    before = designed_copy.read_text()
    with pytest.raises(design_time.ObservationError, match="lakehouse/supplier_stats: the job's plan cannot be made"):
        design_time.accept(spark, SETTINGS)
    assert designed_copy.read_text() == before


def test_diff_names_each_change_with_both_derivations_and_what_it_reaches(spark, monkeypatch):
    monkeypatch.setattr(transforms, "PRICE_TYPE", "DECIMAL(8,0)")
    changes, failures = design_time.diff(spark, SETTINGS, "HEAD")
    assert failures == []
    by_column = {(change.dataset, change.column): change for change in changes}
    price = by_column[("lakehouse/orders", "price")]
    assert price.kind == "changed"
    assert price.before[0] == "try_cast(orders.price as decimal(10,2))"
    assert price.after[0] == "try_cast(orders.price as decimal(8,0))"
    # Through supplier_stats' total to the revenue and the rank computed from it.
    assert price.reaches == [
        "lakehouse/supplier_revenue.region_rank",
        "lakehouse/supplier_revenue.revenue",
        "lakehouse/supplier_stats.total_price",
    ]
    assert price.assets == ["lakehouse/orders", "lakehouse/supplier_revenue", "lakehouse/supplier_stats"]
    assert "orders_values_in_range" in price.checks  # it tests lakehouse/orders.price
    total = by_column[("lakehouse/supplier_stats", "total_price")]
    assert (total.before[0], total.after[0]) == (DESIGNED_TOTAL, "cast(sum(lakehouse/orders.price) as decimal(8,0))")
    assert ("lakehouse/orders", "item") not in by_column  # what did not change is not listed


def test_diff_against_a_revision_that_does_not_exist_is_a_clear_error(spark):
    with pytest.raises(ValueError, match="'no-such-revision' is no git revision"):
        design_time.diff(spark, SETTINGS, "no-such-revision")


@pytest.mark.spark  # the command starts a Spark session of its own
def test_the_design_check_of_the_checkout_passes_on_the_command_line():
    result = subprocess.run(
        [sys.executable, "-m", "lineage_assets.cli", "lineage", "check", "--design"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "lineage check --design: the jobs' plans make the designed lineage" in result.stdout

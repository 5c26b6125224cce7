"""The demo's runs in this process: a blocking check the demo expects to fail is the run's to report
(the demo's summary says it), not Dagster's console's, while an asset that raises still stops the demo
with its error and where it was raised."""

from __future__ import annotations

import dagster as dg
import pytest

from lineage_assets.demo_runs import run_in_process


@dg.asset
def orders_table() -> int:
    return 1


@dg.asset_check(asset=orders_table, blocking=True)
def orders_table_reads_its_schema() -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=False)


@dg.asset(deps=[orders_table])
def daily_totals() -> int:
    return 2


@dg.asset
def broken_table() -> int:
    raise ValueError("the source table is gone")


def test_a_failing_blocking_check_is_the_run_s_to_report_and_dagster_s_console_stays_quiet(capfd):
    with dg.DagsterInstance.ephemeral() as instance:
        ran = run_in_process(
            [orders_table, orders_table_reads_its_schema, daily_totals], instance, [orders_table.key, daily_totals.key]
        )
    ran.raise_failures()  # expected: the demo goes on
    checked = dg.Definitions(assets=[orders_table, daily_totals], asset_checks=[orders_table_reads_its_schema])
    assert ran.checks(checked) == {"orders_table_reads_its_schema": False}
    printed = capfd.readouterr().err
    assert "Traceback" not in printed and "Stack Trace" not in printed and " - DEBUG - " not in printed, printed


def test_an_asset_that_raises_stops_the_demo_with_its_error_and_where_it_was_raised(capfd):
    with dg.DagsterInstance.ephemeral() as instance:
        ran = run_in_process([broken_table], instance, [broken_table.key])
    with pytest.raises(RuntimeError) as failed:
        ran.raise_failures()
    assert 'raise ValueError("the source table is gone")' in str(failed.value)  # its stack, to the line
    assert "the source table is gone" not in capfd.readouterr().err  # said once: by the demo, as it stops

"""What the commands print: every setting's value in effect beside its default, a secret's hidden; the
demo's closing hints at the addresses the settings give; a deployment's rate as people read it; and
nothing but the output a reader takes when it leaves early (`| head`)."""

from __future__ import annotations

import subprocess
import sys
from urllib.parse import quote

from lineage_assets.cli import EXIT_BROKEN_PIPE, main
from lineage_assets.datasets import SUPPLIER_STATS
from lineage_assets.demo import PipelineRun, summary
from lineage_assets.settings import PROJECT_ROOT, Settings
from lineage_assets.settings_environment import documentation
from lineage_assets.stack_commands import _status_line
from lineage_assets.streaming.deployments import DeploymentStatus


def test_the_settings_list_shows_each_value_in_effect_marks_those_changed_and_hides_secrets(monkeypatch, capsys):
    monkeypatch.setenv("LINEAGE_ASSETS_KAFKA_PORT", "29092")
    monkeypatch.setenv("LINEAGE_ASSETS_S3_SECRET_KEY", "not-for-any-screen")
    monkeypatch.delenv("LINEAGE_ASSETS_MARQUEZ_PORT", raising=False)
    assert main(["settings"]) == 0
    shown = capsys.readouterr().out
    # Each setting's row: its mark (changed or not), variable, default, value in effect, meaning.
    rows = {line[2:].split()[0]: (line[0], *line[2:].split()[1:3]) for line in shown.splitlines()[1:-1]}
    assert rows["LINEAGE_ASSETS_KAFKA_PORT"] == ("*", "19092", "29092")
    assert rows["LINEAGE_ASSETS_MARQUEZ_PORT"] == (" ", "15000", "15000")
    assert rows["LINEAGE_ASSETS_S3_SECRET_KEY"] == ("*", "local-secret-key", "(hidden)")
    assert "not-for-any-screen" not in shown
    assert len(rows) == len(documentation())


def test_the_demos_closing_hints_name_the_uis_at_the_settings_addresses():
    settings = Settings(host="127.0.0.2", dagster_port=3300, marquez_web_port=13301)
    hints = summary(PipelineRun(), settings)
    assert "`make dev` opens the Dagster UI on http://127.0.0.2:3300 with these runs" in hints
    # supplier_stats' own lineage page, not Marquez's search, which lists its catalog name's symlink first.
    stats = SUPPLIER_STATS.identity(settings)
    page = f"http://127.0.0.2:13301/lineage/dataset/{quote(stats.namespace, safe='')}/{quote(stats.name, safe='')}"
    assert f"the lineage of supplier_stats in Marquez's UI, {page}\n" in hints
    assert ":3000" not in hints


def test_the_demos_summary_names_each_check_passed_failed_or_skipped():
    run = PipelineRun(checks={"orders_schema_readable": False, "orders_values_in_range": None, "x": True})
    line = next(line for line in summary(run, Settings()).splitlines() if line.startswith("Asset checks: "))
    assert line == "Asset checks: orders_schema_readable FAILED, orders_values_in_range skipped, x passed"


def test_a_running_deployments_rate_is_shown_to_one_decimal_and_a_dash_before_its_first_batch():
    def line(progress) -> str:
        status = DeploymentStatus(
            "lakehouse-orders", "ingest_orders", "running", True, 4242, "r1", None, None, progress, None, [], "log"
        )
        return _status_line(status)

    assert " rows/s=10.1 " in line({"processed_rows_per_second": 10.14455997971088, "time": "t"})
    assert " rows/s=- last batch=- " in line(None) + " "


def test_a_reader_that_leaves_early_ends_the_command_quietly():
    """`lineage-assets settings | head -1`: the pipe's reader closes before the command has printed."""
    command = subprocess.Popen(
        [sys.executable, "-m", "lineage_assets.cli", "settings"],
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert command.stdout is not None and command.stderr is not None
    command.stdout.close()  # the reader gone before the first line
    errors = command.stderr.read().decode()
    assert command.wait(timeout=60) == EXIT_BROKEN_PIPE
    assert errors == ""

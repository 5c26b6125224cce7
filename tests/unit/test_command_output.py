"""What the commands print: every setting's value in effect beside its default, a secret's hidden; the
demo's closing hints at the addresses the settings give."""

from __future__ import annotations

from lineage_assets.cli import main
from lineage_assets.demo import PipelineRun, summary
from lineage_assets.settings import Settings


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
    assert len(rows) == len(Settings.documentation())


def test_the_demos_closing_hints_name_the_uis_at_the_settings_addresses():
    settings = Settings(host="127.0.0.2", dagster_port=3300, marquez_web_port=13301)
    hints = summary(PipelineRun(), settings)
    assert "`make dev` opens the Dagster UI on http://127.0.0.2:3300 with these runs" in hints
    assert "the lineage in Marquez's UI on http://127.0.0.2:13301" in hints
    assert ":3000" not in hints

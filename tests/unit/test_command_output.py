"""What the commands print: the demo's closing hints at the addresses the settings give."""

from __future__ import annotations

from lineage_assets.demo import PipelineRun, summary
from lineage_assets.settings import Settings


def test_the_demos_closing_hints_name_the_uis_at_the_settings_addresses():
    settings = Settings(host="127.0.0.2", dagster_port=3300, marquez_web_port=13301)
    hints = summary(PipelineRun(), settings)
    assert "`make dev` opens the Dagster UI on http://127.0.0.2:3300 with these runs" in hints
    assert "the lineage in Marquez's UI on http://127.0.0.2:13301" in hints
    assert ":3000" not in hints

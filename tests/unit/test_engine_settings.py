"""The stack's Docker engine and Marquez retention, as configured from the settings (pure parts)."""

from __future__ import annotations

from lineage_assets.settings import Settings
from lineage_assets.stack.services.engine import DEBIAN_MIRROR, _debian_mirror
from lineage_assets.stack.services.marquez import _prepare_marquez


def test_the_base_image_comes_from_the_machines_own_debian_mirror(tmp_path):
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example.org/debian\nSuites: bookworm\n\n"
        "Types: deb\nURIs: http://security.example.org/debian-security\nSuites: bookworm-security\n"
    )
    assert _debian_mirror(tmp_path) == "http://mirror.example.org/debian"
    (tmp_path / "sources.list.d" / "debian.sources").unlink()
    (tmp_path / "sources.list").write_text(
        "# old style\ndeb [arch=amd64] http://ftp.example.net/debian bookworm main\n"
    )
    assert _debian_mirror(tmp_path) == "http://ftp.example.net/debian"
    assert _debian_mirror(tmp_path / "nothing") == DEBIAN_MIRROR


def test_marquez_runs_its_retention_job_only_when_asked(tmp_path):
    kept = Settings(state_dir=tmp_path / "a")
    _prepare_marquez(kept)
    assert "dbRetention" not in (tmp_path / "a" / "marquez" / "marquez.yml").read_text()
    pruned = Settings(state_dir=tmp_path / "b", marquez_retention_days=30)
    _prepare_marquez(pruned)
    assert (
        "dbRetention:\n  frequencyMins: 60\n  retentionDays: 30\n"
        in (tmp_path / "b" / "marquez" / "marquez.yml").read_text()
    )

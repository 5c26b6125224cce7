"""The lineage commands open the Dagster instance in DAGSTER_HOME as Dagster does, with or without its
``dagster.yaml``."""

from __future__ import annotations

import dagster as dg

from lineage_assets.assets.common import asset_key
from lineage_assets.cli import main
from lineage_assets.datasets import ORDERS
from lineage_assets.lineage.emitter import LineageEmitter
from lineage_assets.lineage_delivery_verbs import _delivery_status
from lineage_assets.settings import Settings


def test_the_lineage_commands_read_a_dagster_home_without_its_yaml_as_dagster_does(tmp_path, monkeypatch, capsys):
    """Dagster takes a DAGSTER_HOME folder without ``dagster.yaml`` as an instance with its defaults:
    its materializations witness the lineage the log lacks. The settings' own instance, not made yet,
    is no instance; a DAGSTER_HOME that is no folder is refused in one line, naming it."""

    @dg.asset(key=asset_key(ORDERS))
    def orders() -> None:
        pass

    settings = Settings(state_dir=tmp_path / "state")
    emitter = LineageEmitter(settings.lineage_dir)  # an empty log: the lineage of that materialization is missing
    home = tmp_path / "home"
    home.mkdir()
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert dg.materialize([orders], instance=instance).success
    assert not (home / "dagster.yaml").exists()

    monkeypatch.setenv("DAGSTER_HOME", str(home))
    assert _delivery_status(settings, emitter) == 1
    assert "unrecorded    1 materializations without their lineage" in capsys.readouterr().out

    monkeypatch.delenv("DAGSTER_HOME")
    assert _delivery_status(settings, emitter) == 0
    assert "unrecorded    0 materializations without their lineage" in capsys.readouterr().out

    missing = tmp_path / "missing"
    monkeypatch.setenv("DAGSTER_HOME", str(missing))
    monkeypatch.setenv("LINEAGE_ASSETS_STATE_DIR", str(settings.state_dir))
    assert main(["lineage", "status"]) == 2
    assert capsys.readouterr().err == (
        f"lineage-assets: DAGSTER_HOME={str(missing)!r} is not a folder's absolute path (Dagster's instance folder)\n"
    )

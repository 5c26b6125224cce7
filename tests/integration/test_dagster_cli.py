"""Dagster's own CLI from the project root, as a user types it: `dagster asset list` and `dagster asset
materialize` on the project's instance, the one `make dev` shows, which the checkout's ``.env`` names
for Dagster's CLI (``lineage_assets/instance.py``). Dagster 1.13 takes the code location of its
``asset`` commands from ``-m`` only: they read neither ``workspace.yaml`` nor pyproject.toml."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg

from lineage_assets.assets.orders import orders
from lineage_assets.instance import name_in_dotenv, open_instance, prepare_dagster_home
from lineage_assets.settings import PROJECT_ROOT, Settings
from lineage_assets.testing import materialize, pipeline_of_its_own

DAGSTER = str(Path(sys.executable).with_name("dagster"))
DEFINITIONS = ["-m", "lineage_assets.definitions"]


def dagster(settings: Settings, home: Path, *arguments: str) -> subprocess.CompletedProcess:
    """``dagster ARGUMENTS`` from the project root with the pipeline's settings and its instance named:
    the checkout's ``.env`` names a developer's instance only where the environment names none."""
    return subprocess.run(
        [DAGSTER, *arguments],
        cwd=PROJECT_ROOT,
        env={**os.environ, **settings.as_environment(), "DAGSTER_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_dagster_s_cli_lists_the_assets_and_materializes_one_into_the_project_s_instance(stack, settings):
    own = pipeline_of_its_own(settings, "dagster-cli")
    home = prepare_dagster_home(own)  # the instance `make dev` shows for these settings
    listed = dagster(own, home, "asset", "list", *DEFINITIONS)
    assert listed.returncode == 0, listed.stderr[-3000:]
    assert {"orders", "orders_archive", "lakehouse/supplier_stats"} <= set(listed.stdout.split())

    assert materialize([orders], own, run_config={"ops": {"orders": {"config": {"count": 20, "seed": 63}}}}).success
    archived = dagster(own, home, "asset", "materialize", *DEFINITIONS, "--select", "orders_archive")
    assert archived.returncode == 0, archived.stderr[-3000:]
    assert "Using temporary directory" not in archived.stderr  # Dagster's throw-away instance, which it would say

    with open_instance(own, home) as instance:
        materialization = instance.get_latest_materialization_event(dg.AssetKey("orders_archive"))
        assert materialization is not None and materialization.run_id
        run = instance.get_run_by_id(materialization.run_id)
    assert run is not None and run.status == dg.DagsterRunStatus.SUCCESS


def test_the_dotenv_names_the_instance_for_dagster_s_cli_unless_the_environment_names_another(tmp_path):
    project, home, other = tmp_path / "project", tmp_path / "home", tmp_path / "other"
    for folder in (project, home, other):
        folder.mkdir()
    (project / ".env").write_text("KEPT=1\nDAGSTER_HOME=/an/older/checkout/.state/dagster\n")
    name_in_dotenv(home, project / ".env")
    assert (project / ".env").read_text().splitlines()[0] == "KEPT=1"

    def instance_named(environment: dict[str, str]) -> str:
        shown = subprocess.run(
            [DAGSTER, "instance", "info"], cwd=project, env=environment, capture_output=True, text=True, timeout=120
        )
        assert shown.returncode == 0, shown.stderr[-3000:]
        return next(line for line in shown.stdout.splitlines() if line.startswith("$DAGSTER_HOME: "))

    without = {name: value for name, value in os.environ.items() if name != "DAGSTER_HOME"}
    assert instance_named(without) == f"$DAGSTER_HOME: {home.resolve()}"
    assert instance_named({**without, "DAGSTER_HOME": str(other)}) == f"$DAGSTER_HOME: {other}"

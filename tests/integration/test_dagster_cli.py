"""Dagster's own CLI from the project root, as a user types it, on the project's instance: the one
`make dev` shows, which the checkout's ``.env`` names for Dagster's CLI (``lineage_assets/instance.py``).

`dg list defs` and `dg launch --assets orders_archive` need no flag: pyproject.toml's ``[tool.dg]``
table makes the checkout a `dg` project whose code location is ``lineage_assets.definitions``. The
lower-level `dagster asset list` and `dagster asset materialize` of Dagster 1.13 read neither that table
nor ``workspace.yaml``: they need ``-m lineage_assets.definitions`` (exactly one of -f, -m,
--package-name or --autoload-defs-module-name: ``get_repository_python_origin_from_cli_opts``), or
DAGSTER_MODULE_NAME exported, which the ``.env`` cannot set: click reads it before Dagster loads the file."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import dagster as dg
from dagster._core.workspace.load_target import PyProjectFileTarget, WorkspaceFileTarget

from lineage_assets.assets.orders import orders
from lineage_assets.instance import name_in_dotenv, open_instance, prepare_dagster_home
from lineage_assets.settings import PROJECT_ROOT, Settings
from lineage_assets.settings_environment import as_environment
from lineage_assets.testing import materialize, pipeline_of_its_own

DG = str(Path(sys.executable).with_name("dg"))
DAGSTER = str(Path(sys.executable).with_name("dagster"))
DEFINITIONS = ["-m", "lineage_assets.definitions"]  # what `dagster asset ...` needs in Dagster 1.13
ASSETS = {"orders", "orders_archive", "lakehouse/orders", "lakehouse/supplier_stats", "supplier_stats_live"}


def at_the_project_root(settings: Settings, home: Path, *command: str) -> subprocess.CompletedProcess:
    """``command`` (`dg ...` or `dagster ...`) from the project root with the pipeline's settings and its
    instance named: the checkout's ``.env`` names a developer's instance only where the environment names none."""
    return subprocess.run(
        list(command),
        cwd=PROJECT_ROOT,
        env={**os.environ, **as_environment(settings), "DAGSTER_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=600,
    )


def table_cells(table: str) -> set[str]:
    """The cells of the tables `dg list defs` draws (with ASCII borders where the output is not UTF-8)."""
    return {cell.strip() for line in table.splitlines() for cell in re.split("[│|]", line)}


def latest_archive_run(settings: Settings, home: Path) -> dg.DagsterRun | None:
    """The run of the latest materialization of ``orders_archive`` in the instance in ``home``."""
    with open_instance(settings, home) as instance:
        materialization = instance.get_latest_materialization_event(dg.AssetKey("orders_archive"))
        return instance.get_run_by_id(materialization.run_id) if materialization and materialization.run_id else None


def test_dagster_s_cli_lists_the_assets_and_materializes_one_into_the_project_s_instance(stack, settings):
    own = pipeline_of_its_own(settings, "dagster-cli")
    home = prepare_dagster_home(own)  # the instance `make dev` shows for these settings
    listed = at_the_project_root(own, home, DG, "list", "defs")
    assert listed.returncode == 0, listed.stderr[-3000:]
    assert table_cells(listed.stdout) >= ASSETS
    listed_by_module = at_the_project_root(own, home, DAGSTER, "asset", "list", *DEFINITIONS)
    assert listed_by_module.returncode == 0, listed_by_module.stderr[-3000:]
    assert set(listed_by_module.stdout.split()) >= ASSETS

    flagless = (DG, "launch", "--assets", "orders_archive")
    by_module = (DAGSTER, "asset", "materialize", *DEFINITIONS, "--select", "orders_archive")
    for seed, command in ((63, flagless), (64, by_module)):
        # Each run has records of its own to archive.
        orders_config = {"ops": {"orders": {"config": {"count": 20, "seed": seed}}}}
        assert materialize([orders], own, run_config=orders_config).success
        before = latest_archive_run(own, home)
        archived = at_the_project_root(own, home, *command)
        assert archived.returncode == 0, archived.stderr[-3000:]
        # A new run in the project's instance: one in a throw-away instance would leave it unchanged.
        run = latest_archive_run(own, home)
        assert run is not None and run.status == dg.DagsterRunStatus.SUCCESS, command
        assert before is None or run.run_id != before.run_id, command


def test_dg_lists_the_project_s_definitions_from_the_project_root_with_no_flag(tmp_path):
    # An instance of its own: the checkout's `.env` may name the developer's, whose storage is a server.
    environment = {**os.environ, "DAGSTER_HOME": str(tmp_path)}
    listed = subprocess.run(
        [DG, "list", "defs"], cwd=PROJECT_ROOT, env=environment, capture_output=True, text=True, timeout=300
    )
    assert listed.returncode == 0, listed.stderr[-3000:]
    assert table_cells(listed.stdout) >= ASSETS


def test_plain_dagster_dev_loads_the_code_location_make_dev_names(monkeypatch):
    """`dagster dev` with no flag reads pyproject.toml's [tool.dg] table instead of workspace.yaml, which
    `make dev` names (``has_pyproject_dagster_block``): both are the same module under the same name."""
    monkeypatch.chdir(PROJECT_ROOT)
    (from_pyproject,) = PyProjectFileTarget("pyproject.toml").create_origins()
    (from_workspace,) = WorkspaceFileTarget(paths=["workspace.yaml"]).create_origins()
    assert from_pyproject.location_name == from_workspace.location_name
    module = from_pyproject.loadable_target_origin.module_name
    assert module == from_workspace.loadable_target_origin.module_name == DEFINITIONS[1]


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

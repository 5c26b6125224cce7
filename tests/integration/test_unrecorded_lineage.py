"""A materialization whose lineage cannot be written: the data lands, the run says in Dagster that
its lineage is incomplete, and `lineage check` and `lineage status` name it, with Dagster's event log
as the second witness. The lineage folder is a tmpfs of the test's own, filled up: never the
machine's disk."""

from __future__ import annotations

import errno
import logging
import os
import subprocess
import sys

import dagster as dg
import pytest

from lineage_assets.assets.common import asset_key
from lineage_assets.datasets import ORDERS
from lineage_assets.definitions import build_definitions
from lineage_assets.instance import prepare_dagster_home
from lineage_assets.resources.lineage import UNRECORDED_EVENTS
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.settings_environment import as_environment
from lineage_assets.testing import pipeline_of_its_own


@pytest.fixture
def full_lineage_folder(stack, settings):
    """A pipeline of its own whose lineage folder is a 64 KiB tmpfs with no space left."""
    own = pipeline_of_its_own(settings, "unrecorded")
    own.lineage_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(own.lineage_dir)], check=True)
    try:
        with (own.lineage_dir / "filler").open("wb", buffering=0) as filler:
            with pytest.raises(OSError) as full:
                while True:
                    filler.write(b"\0" * 4096)
        assert full.value.errno == errno.ENOSPC
        yield own
    finally:
        subprocess.run(["umount", "--lazy", str(own.lineage_dir)], check=True)


def lineage_command(settings, home, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "lineage_assets.cli", "lineage", *arguments],
        capture_output=True,
        text=True,
        env={**os.environ, **as_environment(settings), "DAGSTER_HOME": str(home)},
        timeout=300,
    )


def test_a_materialization_whose_lineage_cannot_be_written_says_so_and_the_lineage_commands_name_it(
    full_lineage_folder, tmp_path
):
    own = full_lineage_folder
    home = prepare_dagster_home(own, tmp_path / "dagster")
    definitions = build_definitions(SettingsResource.of(own))
    with dg.DagsterInstance.from_config(str(home)) as instance:
        result = dg.materialize(
            [*definitions.assets],
            selection=[asset_key(ORDERS)],
            resources=definitions.resources,
            instance=instance,
            run_config={"ops": {"orders": {"config": {"count": 5}}}},
        )
        assert result.success  # lineage never fails the data job: the orders are produced
        (materialization,) = result.asset_materializations_for_node("orders")
        metadata = materialization.metadata
        assert metadata["rows_out"].value == 5
        assert metadata[UNRECORDED_EVENTS].value == 2  # the asset run's START and COMPLETE
        assert "No space left on device" in str(metadata["lineage/unrecorded_reason"].value)
        warnings = [entry.user_message for entry in instance.all_logs(result.run_id) if entry.level == logging.WARNING]
        assert any("could not be recorded" in message for message in warnings), warnings

    checked = lineage_command(own, home, "check")
    assert checked.returncode == 1, checked.stdout + checked.stderr
    (gap,) = [line for line in checked.stdout.splitlines() if "materialized at" in line]
    assert gap.strip().startswith("- orders materialized at ") and f"by Dagster run {result.run_id}: " in gap
    status = lineage_command(own, home, "status")
    assert status.returncode == 1 and "unrecorded    1 materializations without their lineage" in status.stdout

"""The Dagster instance the project writes (``lineage_assets/instance.py``): Dagster loads it, and the
container profile's run launcher is dagster-docker's, configured without writing a secret. The lineage
commands open the instance in DAGSTER_HOME as Dagster does, with or without its ``dagster.yaml``."""

from __future__ import annotations

import dagster as dg
from dagster_docker import DockerRunLauncher

from lineage_assets.assets.common import asset_key
from lineage_assets.cli import _delivery_status, main
from lineage_assets.datasets import ORDERS
from lineage_assets.instance import dagster_environment, prepare_dagster_home
from lineage_assets.lineage.emitter import LineageEmitter
from lineage_assets.settings import Settings


def test_the_process_profile_keeps_dagsters_default_run_launcher(tmp_path):
    settings = Settings(state_dir=tmp_path / "state")
    home = prepare_dagster_home(settings)
    assert home == tmp_path / "state" / "dagster"
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert type(instance.run_launcher).__name__ == "DefaultRunLauncher"
        # What cancels an upkeep past its maximum runtime, so that a dead one does not hold the schedule.
        assert instance.run_monitoring_enabled and instance.run_monitoring_max_resume_run_attempts == 0
    assert dagster_environment(settings, home)["DAGSTER_HOME"] == str(home)


def test_the_container_profile_launches_runs_in_containers_of_the_image_with_the_settings_by_name(tmp_path):
    settings = Settings(
        state_dir=tmp_path / "state",
        cache_dir=tmp_path / "cache",
        run_launcher="docker",
        docker_image="lineage-assets:test",
        docker_host="unix:///elsewhere/docker.sock",
        s3_secret_key="not-in-any-shown-file",
    )
    home = prepare_dagster_home(settings, tmp_path / "home")
    assert "not-in-any-shown-file" not in (home / "dagster.yaml").read_text()
    with dg.DagsterInstance.from_config(str(home)) as instance:
        launcher = instance.run_launcher
        assert isinstance(launcher, DockerRunLauncher)
        assert launcher.image == "lineage-assets:test"
        # Names only, and no secret's: a run's container reads them from the file the environment names.
        assert all("=" not in v for v in launcher.env_vars) and "LINEAGE_ASSETS_S3_SECRET_KEY" not in launcher.env_vars
        assert "LINEAGE_ASSETS_SECRETS_FILE" in launcher.env_vars
        options = launcher.container_kwargs
        assert options["network_mode"] == "host" and options["auto_remove"] is True
        assert {path: mount["mode"] for path, mount in options["volumes"].items()} == {
            str(tmp_path / "cache"): "ro",
            str(tmp_path / "cache" / "class-sharing"): "rw",
            str(tmp_path / "state"): "rw",
            str(home): "rw",
        }
    environment = dagster_environment(settings, home)
    # Every variable the launcher names is in the environment of the processes that launch runs.
    assert set(launcher.env_vars) <= set(environment)
    assert environment["LINEAGE_ASSETS_S3_SECRET_KEY"] == "not-in-any-shown-file"  # the host's processes keep it
    container = {name: environment[name] for name in launcher.env_vars}
    assert (
        "not-in-any-shown-file" not in str(container)
        and Settings.from_env(container).s3_secret_key == "not-in-any-shown-file"
    )
    assert environment["DOCKER_HOST"] == "unix:///elsewhere/docker.sock" and environment["DAGSTER_HOME"] == str(home)


def test_an_instance_inside_the_state_folder_is_not_mounted_twice(tmp_path):
    settings = Settings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache", run_launcher="docker")
    home = prepare_dagster_home(settings)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        volumes = instance.run_launcher.container_kwargs["volumes"]
    assert set(volumes) == {str(tmp_path / "cache"), str(tmp_path / "cache" / "class-sharing"), str(tmp_path / "state")}


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

"""The Dagster instance the project writes (``lineage_assets/instance.py``): Dagster loads it, its storage
in the stack's PostgreSQL, a database for each instance folder; the container profile's run launcher is
dagster-docker's, configured without writing a secret."""

from __future__ import annotations

import dataclasses

import dagster as dg
from dagster_docker import DockerRunLauncher

from lineage_assets.instance import dagster_database, dagster_environment, open_instance, prepare_dagster_home
from lineage_assets.settings_environment import settings_from_env


def test_the_process_profile_keeps_dagsters_default_run_launcher(stack, settings, tmp_path):
    settings = dataclasses.replace(settings, state_dir=tmp_path / "state")
    home = prepare_dagster_home(settings)
    assert home == tmp_path / "state" / "dagster"
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert type(instance.run_launcher).__name__ == "DefaultRunLauncher"
        # What cancels an upkeep past its maximum runtime, so that a dead one does not hold the schedule.
        assert instance.run_monitoring_enabled and instance.run_monitoring_max_resume_run_attempts == 0
    assert dagster_environment(settings, home)["DAGSTER_HOME"] == str(home)


def test_the_container_profile_launches_runs_in_containers_of_the_image_with_the_settings_by_name(
    stack, settings, tmp_path
):
    settings = dataclasses.replace(
        settings,
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
        and settings_from_env(container).s3_secret_key == "not-in-any-shown-file"
    )
    assert environment["DOCKER_HOST"] == "unix:///elsewhere/docker.sock" and environment["DAGSTER_HOME"] == str(home)


def test_an_instance_inside_the_state_folder_is_not_mounted_twice(stack, settings, tmp_path):
    settings = dataclasses.replace(
        settings, state_dir=tmp_path / "state", cache_dir=tmp_path / "cache", run_launcher="docker"
    )
    home = prepare_dagster_home(settings)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        volumes = instance.run_launcher.container_kwargs["volumes"]
    assert set(volumes) == {str(tmp_path / "cache"), str(tmp_path / "cache" / "class-sharing"), str(tmp_path / "state")}


def test_each_instance_folder_keeps_its_runs_in_a_database_of_its_own_in_the_stack_s_postgresql(
    stack, settings, tmp_path
):
    settings = dataclasses.replace(settings, state_dir=tmp_path / "state")

    @dg.asset
    def probe() -> None:
        pass

    mine, other = (prepare_dagster_home(settings, tmp_path / name) for name in ("mine", "other"))
    with open_instance(settings, mine) as instance:
        assert dg.materialize([probe], instance=instance).success
        storage = instance.run_storage
        assert type(storage).__name__ == "PostgresRunStorage"
        assert storage.postgres_url.endswith(
            f"@{settings.host}:{settings.postgres_port}/{dagster_database(settings, mine)}"
        )
    with open_instance(settings, prepare_dagster_home(settings, mine)) as instance:  # prepared again: kept
        assert instance.get_runs_count() == 1
    with open_instance(settings, other) as instance:
        assert instance.get_runs_count() == 0
    assert len({dagster_database(settings, home) for home in (mine, other, prepare_dagster_home(settings))}) == 3

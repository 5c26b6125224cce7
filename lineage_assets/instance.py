"""The Dagster instance of `make dev` and the demo: its folder (``DAGSTER_HOME``), its ``dagster.yaml``
and the environment of the Dagster processes using it, in one place.

With ``run_launcher=docker`` (the container profile) dagster-docker's ``DockerRunLauncher`` starts
each run in a container of the project's image on the project's engine: the run's Spark job runs
inside that container, the state folder and this instance's folder are mounted at their host paths,
and the settings reach it from the launching process's environment.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from lineage_assets.settings import Settings


def dagster_home(settings: Settings) -> Path:
    return settings.state_dir / "dagster"


def dagster_config(settings: Settings, home: Path) -> dict:
    """The instance's ``dagster.yaml``: storage in ``home`` (Dagster's default), no telemetry, run
    monitoring, and the run launcher the settings choose."""
    # Run monitoring (in `dagster dev`'s daemon) ends a run past its `dagster/max_runtime` tag, one stuck
    # starting or canceling, and a container run whose container is gone; it never resumes one.
    config: dict = {"telemetry": {"enabled": False}, "run_monitoring": {"enabled": True, "max_resume_run_attempts": 0}}
    if settings.run_launcher == "docker":
        from lineage_assets.stack.services.engine import container_environment, container_options

        config["run_launcher"] = {
            "module": "dagster_docker",
            "class": "DockerRunLauncher",
            "config": {
                "image": settings.docker_image,
                # Names only: each value is read from the launching process's environment
                # (``dagster_environment``); the secrets reach a run's container in a file.
                "env_vars": sorted(container_environment(settings)),
                # A run's record, logs and lineage are in the instance and the state folder, not the container.
                "container_kwargs": {**container_options(settings, home), "auto_remove": True},
            },
        }
    return config


def prepare_dagster_home(settings: Settings, home: Path | None = None) -> Path:
    """The instance's folder with its ``dagster.yaml`` written for ``settings``."""
    home = home or dagster_home(settings)
    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text(yaml.safe_dump(dagster_config(settings, home), sort_keys=False))
    return home


def dagster_environment(settings: Settings, home: Path) -> dict[str, str]:
    """The environment of Dagster processes on the instance in ``home`` (``dagster dev``, its daemon
    and code servers): the settings, and for a run launcher in containers the Docker engine and the
    file the containers read their secrets from."""
    environment = {**os.environ, **settings.as_environment(), "DAGSTER_HOME": str(home)}
    if settings.run_launcher == "docker":
        from lineage_assets.stack.services.engine import container_environment, engine_url

        environment["DOCKER_HOST"] = engine_url(settings)
        environment.update(container_environment(settings))
    return environment

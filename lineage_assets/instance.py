"""The Dagster instance of `make dev` and the demo: its folder (``DAGSTER_HOME``), its ``dagster.yaml``
and the environment of the Dagster processes using it, in one place.

Dagster's own CLI (`dg list defs`, `dg launch`, `dagster dev`, `dagster asset materialize`) opens this
instance from the project root too: preparing it names it as DAGSTER_HOME in the checkout's ``.env``,
which Dagster's CLI loads from its working directory (``DOTENV``).

Its storage (runs, event logs, schedules and sensors' ticks) is in the local stack's PostgreSQL, as
Dagster's own deployment guides keep it: a database for each instance folder (the project's, a
test's, a benchmark's), so that each keeps its own runs. Opening it brings
its schema up to the installed Dagster's (``dagster instance migrate``), as after an upgrade.

With ``run_launcher=docker`` (the container profile) dagster-docker's ``DockerRunLauncher`` starts
each run in a container of the project's image on the project's engine: the run's Spark job runs
inside that container, the state folder and this instance's folder are mounted at their host paths,
and the settings reach it from the launching process's environment.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from lineage_assets.datasets import DATASETS
from lineage_assets.settings import ENV_PREFIX, PROJECT_ROOT, Settings
from lineage_assets.settings_environment import as_environment

if TYPE_CHECKING:
    import dagster as dg

POSTGRES_PASSWORD = ENV_PREFIX + "POSTGRES_PASSWORD"
# Read by Dagster's CLI from its working directory before it opens an instance (git-ignored: it holds
# this checkout's absolute path).
DOTENV = PROJECT_ROOT / ".env"


def dagster_home(settings: Settings) -> Path:
    return settings.state_dir / "dagster"


def dagster_database(settings: Settings, home: Path) -> str:
    """The PostgreSQL database of the instance in ``home``, named after the folder: pipelines of their
    own on one stack (tests, benchmarks) keep their runs apart."""
    return f"{settings.dagster_database}_{hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:12]}"


def dagster_config(settings: Settings, home: Path) -> dict:
    """The instance's ``dagster.yaml``: storage in PostgreSQL, no telemetry, run monitoring, and the run
    launcher the settings choose."""
    database = {
        "username": settings.postgres_user,
        "hostname": settings.host,
        "port": settings.postgres_port,
        "db_name": dagster_database(settings, home),
        # The driver dagster-postgres installs: SQLAlchemy 2.1's default for postgresql:// is psycopg 3.
        "scheme": "postgresql+psycopg2",
        # By name: Dagster reads it from the environment of each process that opens the instance.
        **({"password": {"env": POSTGRES_PASSWORD}} if settings.postgres_password else {}),
    }
    # Run monitoring (in `dagster dev`'s daemon) ends a run past its `dagster/max_runtime` tag, one stuck
    # starting or canceling, and a container run whose container is gone; it never resumes one.
    config: dict = {
        "storage": {"postgres": {"postgres_db": database}},
        "telemetry": {"enabled": False},
        "run_monitoring": {"enabled": True, "max_resume_run_attempts": 0},
        # Each asset is in its job's pool (``asset_spec_arguments``); at most one queued run holding a
        # step of a pool is let out of the run queue at a time, so a second run of a streaming job or of
        # a day of supplier_stats waits for the first. A run executed in process is not queued: the
        # streaming jobs' locks refuse it up front instead (``streaming/exclusive.py``).
        "concurrency": {"pools": {"granularity": "run", "default_limit": 1}},
    }
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
    """The instance's folder with its ``dagster.yaml`` written for ``settings``, its database made and
    its schema the installed Dagster's (the stack's PostgreSQL must be up)."""
    from lineage_assets.stack.services.storage import ensure_database

    home = home or dagster_home(settings)
    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text(yaml.safe_dump(dagster_config(settings, home), sort_keys=False))
    ensure_database(settings, dagster_database(settings, home))
    with open_instance(settings, home) as instance:
        instance.upgrade(print_fn=lambda line: None)  # `dagster instance migrate`; nothing to do when current
        # Each job's pool known to the run queue before its first run: the queue takes a pool it has
        # not seen for one without a limit, and lets two runs queued together out at once.
        known = instance.event_log_storage.get_concurrency_keys()
        for pool in sorted({dataset.job.name for dataset in DATASETS.values()} - known):
            instance.event_log_storage.initialize_concurrency_limit_to_default(pool)
    # Only the checkout's own instance: a test's or a benchmark's would take the developer's place.
    if home.resolve() == dagster_home(Settings()).resolve():
        name_in_dotenv(home)
    return home


def name_in_dotenv(home: Path, dotenv: Path = DOTENV) -> None:
    """``home`` as the DAGSTER_HOME of ``dotenv`` (its other lines kept), unless the environment sets
    one: a test's or benchmark's ``dagster`` from the project root keeps the instance it names."""
    line = f'DAGSTER_HOME="${{DAGSTER_HOME:-{home.resolve()}}}"'
    kept = (
        [old for old in dotenv.read_text().splitlines() if not old.startswith("DAGSTER_HOME=")]
        if dotenv.exists()
        else []
    )
    dotenv.write_text("\n".join([*kept, line]) + "\n")


def open_instance(settings: Settings, home: Path) -> dg.DagsterInstance:
    """The instance in ``home``, opened in this process: its storage's password, if any, where its
    ``dagster.yaml`` names it."""
    import dagster as dg

    if settings.postgres_password:
        os.environ[POSTGRES_PASSWORD] = settings.postgres_password
    return dg.DagsterInstance.from_config(str(home))


def dagster_environment(settings: Settings, home: Path) -> dict[str, str]:
    """The environment of Dagster processes on the instance in ``home`` (``dagster dev``, its daemon
    and code servers): the settings, and for a run launcher in containers the Docker engine and the
    file the containers read their secrets from."""
    environment = {**os.environ, **as_environment(settings), "DAGSTER_HOME": str(home)}
    if settings.run_launcher == "docker":
        from lineage_assets.stack.services.engine import container_environment, engine_url

        environment["DOCKER_HOST"] = engine_url(settings)
        environment.update(container_environment(settings))
    return environment

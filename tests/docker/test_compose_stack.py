"""The local stack as containers (``infra/compose.yaml``, its image built here from the process stack's
builds): every service healthy where the settings say, the same server versions as the process stack,
the pipeline end to end on it with both lineage checks clean, and Dagster deployed beside it by the
file's ``dagster`` profile running the demo's pass through its run queue."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from lineage_assets.lineage.check import check_log, check_marquez_with_design
from lineage_assets.lineage.emitter import emitter_for
from lineage_assets.lineage.marquez import MarquezApi
from lineage_assets.private_files import replace_private
from lineage_assets.settings import ENV_PREFIX, SECRETS_FILE_VARIABLE, Settings
from lineage_assets.settings_environment import as_environment, secret_environment, secrets_file_text
from lineage_assets.stack.containers import COMPOSE_FILE, STACK_IMAGE, build_stack_image, stack_services
from lineage_assets.stack.services.dagster import DAGSTER_SERVICES as DAGSTER
from lineage_assets.stack.services.engine import engine_url
from lineage_assets.stack.supervisor import Supervisor
from lineage_assets.testing import isolated_settings, pipeline_of_its_own
from tests.conftest import wait_for
from tests.integration.test_dagster_services import graphql
from tests.process_arguments import ArgumentSampler

COMPOSE_PORT_OFFSET = 13200
PROJECT = "lineage-assets-compose-test"
STACK_SERVICES = [service.name for service in stack_services()]
DAGSTER_SERVICES = [service.name for service in DAGSTER]
DEMO = ["demo", "--orders", "200", "--seed", "4242"]
DAGSTER_PROFILE = ["--profile", "dagster"]  # also on `down`, which otherwise leaves the profile's containers
# The image builds and two demos on one compose stack take longer than the suite's 900 s for a test.
pytestmark = pytest.mark.timeout(2400)


def compose(settings, *arguments: str, timeout: float = 300) -> str:
    """`docker compose` (or Debian's docker-compose) on the project's file, with the settings passed
    as docs/production.md says: as LINEAGE_ASSETS_* variables of its environment, the secret ones in
    the secrets file it names."""
    command = ["docker-compose"] if shutil.which("docker-compose") else ["docker", "compose"]
    folders = {ENV_PREFIX + "STATE_DIR", ENV_PREFIX + "CACHE_DIR"}  # the image's own
    variables = {name: value for name, value in as_environment(settings, secrets=False).items() if name not in folders}
    secrets = replace_private(settings.state_dir / "compose-secrets.env", secrets_file_text(settings))
    done = subprocess.run(
        [*command, "-p", PROJECT, "-f", str(COMPOSE_FILE), *arguments],
        env={
            **{name: value for name, value in os.environ.items() if not name.startswith(ENV_PREFIX)},
            **variables,
            SECRETS_FILE_VARIABLE: str(secrets),
            "DOCKER_HOST": engine_url(settings),
        },
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def all_healthy(engine, services: list[str]) -> dict:
    """The compose project's containers by service, once exactly ``services`` run and all are healthy."""

    def containers() -> dict:
        found = engine.containers.list(all=True, filters={"label": f"com.docker.compose.project={PROJECT}"})
        return {c.labels["com.docker.compose.service"]: c for c in found}

    wait_for(
        lambda: (
            set(containers()) == set(services)
            and all(c.attrs["State"].get("Health", {}).get("Status") == "healthy" for c in containers().values())
        ),
        300,
        f"every container of the compose project healthy: {', '.join(services)}",
        poll=0.5,
    )
    return containers()


@pytest.fixture(scope="module")
def compose_stack(engine, tmp_path_factory):
    """The compose stack on ports of its own, once healthy (its start time printed); removed with its volume."""
    settings = isolated_settings("compose", offset=COMPOSE_PORT_OFFSET, state_dir=tmp_path_factory.mktemp("compose"))
    build_stack_image(settings, engine)
    started = time.monotonic()
    compose(settings, "up", "-d")
    try:
        containers = all_healthy(engine, STACK_SERVICES)
        print(f"compose stack healthy after {time.monotonic() - started:.1f} s")
        yield settings, engine, containers
    finally:
        compose(settings, *DAGSTER_PROFILE, "down", "-v")


def test_every_service_runs_from_the_stack_image_and_answers_where_the_settings_say(compose_stack, settings):
    own, _, containers = compose_stack
    assert set(containers) == set(STACK_SERVICES)
    secrets = secret_environment(own)
    assert secrets[ENV_PREFIX + "S3_SECRET_KEY"] != Settings().s3_secret_key  # the services run with this one
    for name, container in containers.items():
        assert container.image.tags == [STACK_IMAGE]
        assert container.attrs["Config"]["Cmd"] == ["lineage-assets", "stack", "serve", name]
        assert container.attrs["HostConfig"]["NetworkMode"] == "host"
        # What `docker inspect` shows names the secrets' file, never a secret.
        shown = dict(variable.split("=", 1) for variable in container.attrs["Config"]["Env"])
        assert shown[SECRETS_FILE_VARIABLE] == "/run/secrets/lineage_assets"
        assert not set(secrets) & set(shown), name
        assert not {value for value in secrets.values() if value} & set(shown.values()), name
    statuses = Supervisor(own).status(list(STACK_SERVICES))
    assert [(s.name, s.healthy, s.pid) for s in statuses] == [(name, True, None) for name in STACK_SERVICES]
    # The same builds as the process stack: each server's jars, by name and version.
    kafka = containers["kafka"]
    for server in [service.jars for service in stack_services() if service.jars]:
        listing = kafka.exec_run(["ls", "-A", f"/opt/lineage-assets/cache/jars/{server}"]).output.decode().split()
        assert sorted(listing) == sorted(path.name for path in (settings.jars_dir / server).iterdir()), server


def test_the_pipeline_runs_on_the_compose_stack_and_both_lineage_checks_are_clean(compose_stack):
    """`lineage-assets demo` against the compose stack, as a user runs it there: in a process of its own,
    whose Spark session (the asset checks') is the compose stack's, not the test stack's. No process on
    the machine shows the S3 secret in its arguments meanwhile: not the checks' in-process Spark (started
    by pyspark), not a job's spark-submit, not a container's server. Its topics, tables and state are its
    own: the Dagster deployment's demo below runs on the same servers from a state folder of its own."""
    own = pipeline_of_its_own(compose_stack[0], "host-demo")
    with ArgumentSampler(own.s3_secret_key.encode()) as arguments:
        done = subprocess.run(
            [sys.executable, "-m", "lineage_assets.cli", *DEMO],
            env={**os.environ, **as_environment(own)},
            capture_output=True,
            text=True,
            timeout=900,
        )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]  # every check passed, no lineage gap
    assert arguments.holding == {}
    assert arguments.saw(b"lineage-assets-checks", b"pyspark-shell")  # the checks' session was sampled
    rows = dict(line.split() for line in done.stdout.splitlines() if line.startswith("  lakehouse/orders "))
    assert int(rows["lakehouse/orders"]) > 0
    emitter = emitter_for(own)
    assert check_log(emitter.log, own) == []
    assert emitter.flush(timeout=90)
    gaps, _ = check_marquez_with_design(MarquezApi.of(own), own, emitter.log)
    assert gaps == []


def test_dagster_deployed_by_the_compose_file_runs_the_demos_pass_through_its_run_queue(compose_stack):
    """The profile ``dagster`` adds Dagster as its Docker deployment guide runs it: a code-location server,
    the webserver on a workspace pointing at it, and the daemon, each a container of the stack's image on
    the instance in the stack's PostgreSQL. The demo, run where a user of the compose stack runs it (in a
    container of the deployment, on its state volume), launches each run through the webserver; the
    daemon lets each out of the run queue; both lineage checks are clean."""
    own, engine, _ = compose_stack
    compose(own, *DAGSTER_PROFILE, "up", "-d")
    deployed = all_healthy(engine, [*STACK_SERVICES, *DAGSTER_SERVICES])
    for name in DAGSTER_SERVICES:
        shown = dict(variable.split("=", 1) for variable in deployed[name].attrs["Config"]["Env"])
        assert shown[ENV_PREFIX + "DAGSTER"] == "services", name
    out = compose(
        own, *DAGSTER_PROFILE, "exec", "-T", "dagster-webserver", "lineage-assets", *DEMO, timeout=1500
    )  # exit 0: every check passed, both lineage checks clean
    rows = dict(line.split() for line in out.splitlines() if line.startswith("  lakehouse/orders "))
    assert int(rows["lakehouse/orders"]) > 0
    runs = graphql(own, "{ runsOrError { ... on Runs { results { runId status } } } }")["runsOrError"]["results"]
    assert len(runs) >= 3 and {run["status"] for run in runs} == {"SUCCESS"}, runs  # orders, streaming, a day
    for run in runs:
        events = graphql(
            own,
            "query($id: ID!) { logsForRun(runId: $id) { ... on EventConnection { events { __typename } } } }",
            id=run["runId"],
        )["logsForRun"]["events"]
        kinds = [event["__typename"] for event in events]
        # Queued by the webserver, launched out of the queue by the daemon, then started by the code server.
        steps = ["RunEnqueuedEvent", "RunStartingEvent", "RunStartEvent"]
        assert [kind for kind in kinds if kind in steps] == steps, kinds

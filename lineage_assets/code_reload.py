"""`lineage-assets stack reload`: Dagster's code server (``dagster=services``) started again on the
project's code and settings as they are now, without ending a run."""

from __future__ import annotations

import urllib.parse

import dagster as dg
from dagster_graphql import DagsterGraphQLClient, ReloadRepositoryLocationStatus

from lineage_assets.assets.in_progress import UNDER_WAY
from lineage_assets.instance import dagster_home, open_instance
from lineage_assets.settings import PROJECT_ROOT
from lineage_assets.stack.services.base import StackError
from lineage_assets.stack.services.dagster import DAGSTER_CODE, LOCATION
from lineage_assets.stack.supervisor import Supervisor


def reload_code(supervisor: Supervisor) -> str:
    """The code server started again on the project's code and settings as they are now, and the
    webserver's code location loaded again from it (the daemon reads its workspace again within a
    minute on its own). Refused while a run is under way: its process is the code server's child."""
    settings = supervisor.settings
    if settings.dagster != "services":
        raise StackError(
            "stack reload: the stack runs Dagster's services only with LINEAGE_ASSETS_DAGSTER=services "
            "(`make dev` reloads the code itself)"
        )
    with open_instance(settings, dagster_home(settings)) as instance:
        under_way = [record.dagster_run for record in instance.get_run_records(dg.RunsFilter(statuses=UNDER_WAY))]
    if under_way:
        runs = ", ".join(f"{run.run_id} ({run.job_name}, {run.status.value})" for run in under_way)
        raise StackError(f"stack reload: not while runs are under way, which would end with the code server: {runs}")
    supervisor.down([DAGSTER_CODE.name])
    if not all(status.healthy for status in supervisor.up([DAGSTER_CODE.name])):
        raise StackError(f"stack reload: the code server did not start again; see {DAGSTER_CODE.log_file(settings)}")
    address = urllib.parse.urlsplit(settings.dagster_url)
    client = DagsterGraphQLClient(address.hostname or settings.host, port_number=address.port)
    reloaded = client.reload_repository_location(LOCATION)
    if reloaded.status != ReloadRepositoryLocationStatus.SUCCESS:
        raise StackError(f"stack reload: the webserver could not load {LOCATION}: {reloaded.message}")
    return f"dagster-code: started again on {PROJECT_ROOT}; the webserver has loaded {LOCATION} from it"

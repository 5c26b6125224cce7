"""One run at a time of a streaming job: a second catch-up run, or a deployment, asked for while a
catch-up run of the job is going on is refused up front with a message naming that run."""

from __future__ import annotations

import threading

import dagster as dg
import pytest

from lineage_assets.assets.common import asset_key
from lineage_assets.datasets import LAKEHOUSE_ORDERS
from lineage_assets.definitions import build_definitions
from lineage_assets.streaming.deployments import DeploymentError, LocalDeployments
from lineage_assets.streaming.exclusive import running
from tests.conftest import wait_for
from tests.integration.test_deployments import orders_topic_ready
from tests.suite import SHARED_PIPELINE

pytestmark = pytest.mark.xdist_group(SHARED_PIPELINE)  # the test stack's own topics, tables and lineage


def catch_up(environment) -> dg.ExecuteInJobResult:
    definitions = build_definitions(environment)
    return dg.materialize(
        [*definitions.assets],
        selection=[asset_key(LAKEHOUSE_ORDERS)],
        resources=definitions.resources,
        instance=dg.DagsterInstance.ephemeral(),
        raise_on_error=False,
    )


def test_a_second_run_of_a_streaming_job_is_refused_naming_the_running_one(stack, settings):
    environment = orders_topic_ready(settings)
    first: dict = {}
    going = threading.Thread(target=lambda: first.update(result=catch_up(environment)))
    going.start()
    try:
        holder = wait_for(
            lambda: running(settings.state_dir, LAKEHOUSE_ORDERS.job.name),
            timeout=120,
            what="the first run to hold the job",
            poll=0.1,
        )
        second = catch_up(environment)
        with pytest.raises(DeploymentError, match=r"lakehouse/orders runs already: catch-up Dagster run "):
            LocalDeployments(settings).deploy(LAKEHOUSE_ORDERS.key)
    finally:
        going.join()
    assert first["result"].success
    assert holder.startswith(f"catch-up Dagster run {first['result'].run_id} (pid ")
    assert not second.success
    failure = next(e for e in second.all_events if e.is_step_failure).step_failure_data.error
    assert (
        f"lakehouse/orders runs already: {holder}; a second run of the job would commit the same checkpoint"
        in (failure.cause or failure).message
    )
    assert running(settings.state_dir, LAKEHOUSE_ORDERS.job.name) is None  # the first run let go as it ended

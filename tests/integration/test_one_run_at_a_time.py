"""One run at a time of a streaming job: a second catch-up run, or a deployment, asked for while a
catch-up run of the job is going on is refused up front with a message naming that run; of two demos
started at the same instant, one runs and the other is refused in one line before it does anything."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading

import dagster as dg
import pytest

from lineage_assets.assets.common import asset_key
from lineage_assets.datasets import ARCHIVE, LAKEHOUSE_ORDERS
from lineage_assets.definitions import build_definitions
from lineage_assets.lineage.emitter import emitter_for
from lineage_assets.settings_environment import as_environment
from lineage_assets.streaming.deployments import DeploymentError, LocalDeployments
from lineage_assets.streaming.exclusive import exclusive_run, running
from lineage_assets.testing import module_pipeline, pipeline_of_its_own
from tests.conftest import wait_for
from tests.integration.test_dead_letters import high_watermark
from tests.integration.test_deployments import orders_topic_ready

settings = module_pipeline("one-run-at-a-time")  # its runs beside the shared pipeline's, on another worker


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
    # Refused as it started, before any step: its resources were not set up.
    assert not [e for e in second.all_events if e.event_type == dg.DagsterEventType.STEP_START]
    (refusal,) = [e for e in second.all_events if e.event_type == dg.DagsterEventType.RESOURCE_INIT_FAILURE]
    assert refusal.event_specific_data.error.message.startswith(
        f"lineage_assets.streaming.exclusive.AlreadyRunning: lakehouse/orders runs already: {holder}; a second "
        "run of the job would commit the same checkpoint"
    )
    assert running(settings.state_dir, LAKEHOUSE_ORDERS.job.name) is None  # the first run let go as it ended


def test_a_demo_while_a_streaming_job_runs_is_refused_in_one_line_before_it_produces_an_order(stack, settings):
    """`lineage-assets demo` on a pipeline of its own while its archive job runs elsewhere (held here):
    refused before it produces an order, in one line naming the holder, with no traceback."""
    own = pipeline_of_its_own(settings, "refused-demo")
    holder = "a deployment of the archive (pid 1)"
    with exclusive_run(own.state_dir, ARCHIVE.job.name, ARCHIVE.key, holder):
        done = subprocess.run(
            [sys.executable, "-m", "lineage_assets.cli", "demo", "--orders", "5"],
            env={**os.environ, **as_environment(own)},
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        f"lineage-assets: {ARCHIVE.key} runs already: {holder}; a second run of the job would commit the same "
        "checkpoint. Wait for it to end, or stop it"
    ]
    assert "orders: producing" not in done.stdout and emitter_for(own).events() == []  # no run of any job


# `lineage-assets demo` in a process that, once its imports are done, says it is ready (the first file)
# and waits for the barrier (the second) to begin: two of them begin at the same instant.
DEMO_AT_THE_BARRIER = """
import sys, time
from pathlib import Path
from lineage_assets import demo
from lineage_assets.cli import main
ready, barrier = Path(sys.argv[1]), Path(sys.argv[2])
ready.touch()
while not barrier.exists():
    time.sleep(0.001)
sys.exit(main(["demo", "--orders", "5", "--seed", "7"]))
"""


def test_of_two_demos_started_at_the_same_instant_one_runs_and_the_other_is_refused_in_one_line(
    stack, settings, tmp_path
):
    own = pipeline_of_its_own(settings, "simultaneous-demos")
    barrier = tmp_path / "barrier"
    demos = [
        subprocess.Popen(
            [sys.executable, "-c", DEMO_AT_THE_BARRIER, str(tmp_path / f"ready-{n}"), str(barrier)],
            env={**os.environ, **as_environment(own)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(2)
    ]
    wait_for(lambda: all((tmp_path / f"ready-{n}").exists() for n in range(2)), 300, "both demos to be ready", poll=0.1)
    barrier.touch()
    ended = {demo.pid: (*demo.communicate(timeout=1200), demo.returncode) for demo in demos}
    assert sorted(code for _, _, code in ended.values()) == [0, 2], [err[-3000:] for _, err, _ in ended.values()]
    (loser,) = [pid for pid, (_, _, code) in ended.items() if code == 2]
    (winner,) = set(ended) - {loser}
    out, err, code = ended[winner]
    assert code == 0 and "orders: producing 5 orders" in out, out + err
    out, err, code = ended[loser]
    # One line naming the running demo; nothing else said, no Dagster run, no order produced.
    (refusal,) = err.splitlines()
    assert re.fullmatch(
        rf"lineage-assets: \S+ runs already: lineage-assets demo \(pid {winner}\); a second run of the job would "
        r"commit the same checkpoint\. Wait for it to end, or stop it",
        refusal,
    ), err
    assert out.splitlines() == ["demo: 5 orders, seed 7"]
    assert high_watermark(own, own.orders_topic) == 5  # the winner's orders only

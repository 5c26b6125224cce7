"""The streaming jobs' locks: a run claims all of its jobs or none, and its steps run under its claim;
a demo claims them all for its whole pass, and the runs it makes run under its claim."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from lineage_assets.streaming.exclusive import (
    AlreadyRunning,
    catch_up_holder,
    demo_holder,
    exclusive_run,
    exclusive_runs,
    exclusive_step,
    running,
)

JOBS = {"archive": "orders_archive", "ingestion": "lakehouse/orders", "live": "supplier_stats_live"}


def test_a_run_that_finds_one_of_its_jobs_held_takes_none_and_names_the_holder(tmp_path):
    with exclusive_run(tmp_path, "live", "supplier_stats_live", "a deployment (pid 1)"):
        with pytest.raises(AlreadyRunning, match=r"^supplier_stats_live runs already: a deployment \(pid 1\); "):
            with exclusive_runs(tmp_path, JOBS, catch_up_holder("run-2")):
                pytest.fail("the run went on")
        assert running(tmp_path, "archive") is None and running(tmp_path, "ingestion") is None  # let go at once
    with exclusive_runs(tmp_path, JOBS, catch_up_holder("run-2")):
        assert {name: running(tmp_path, name) for name in JOBS} == {name: catch_up_holder("run-2") for name in JOBS}
    assert all(running(tmp_path, name) is None for name in JOBS)


def test_a_step_runs_under_its_own_runs_claim_and_is_refused_under_another_runs(tmp_path):
    with exclusive_runs(tmp_path, JOBS, catch_up_holder("run-1")):
        with exclusive_step(tmp_path, "ingestion", "lakehouse/orders", "run-1"):
            assert running(tmp_path, "ingestion") == catch_up_holder("run-1")
        assert running(tmp_path, "ingestion") == catch_up_holder("run-1")  # the claim outlives the step
        with pytest.raises(AlreadyRunning, match=r"catch-up Dagster run run-1 \(pid "):
            with exclusive_step(tmp_path, "ingestion", "lakehouse/orders", "run-2"):
                pytest.fail("the step went on")
    with exclusive_step(tmp_path, "ingestion", "lakehouse/orders", "run-3"):  # no claim: the step takes the lock
        assert running(tmp_path, "ingestion") == catch_up_holder("run-3")
    assert running(tmp_path, "ingestion") is None


# A demo's claim in a process of its own: it waits for the file ``go``, claims every job, says so and
# holds the claim for a second; refused, it prints the refusal.
DEMO = """
import sys, time
from pathlib import Path
from lineage_assets.streaming.exclusive import AlreadyRunning, demo_holder, exclusive_runs
state, go = Path(sys.argv[1]), Path(sys.argv[2])
while not go.exists():
    time.sleep(0.001)
try:
    with exclusive_runs(state, {"archive": "orders_archive", "ingestion": "lakehouse/orders"}, demo_holder()):
        print("claimed", flush=True)
        time.sleep(1)
except AlreadyRunning as refused:
    print(refused, flush=True)
"""


def test_of_two_demos_claiming_at_the_same_instant_one_runs_and_the_other_is_refused_naming_it(tmp_path):
    go = tmp_path / "go"
    demos = [
        subprocess.Popen([sys.executable, "-c", DEMO, str(tmp_path), str(go)], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    time.sleep(3)  # both started and waiting
    go.touch()
    outputs = {demo.pid: demo.communicate(timeout=60)[0].strip() for demo in demos}
    (winner,) = [pid for pid, output in outputs.items() if output == "claimed"]
    (refusal,) = [output for pid, output in outputs.items() if pid != winner]
    assert refusal == (
        f"orders_archive runs already: lineage-assets demo (pid {winner}); a second run of the job would commit "
        "the same checkpoint. Wait for it to end, or stop it"
    )


def test_the_runs_a_demo_makes_run_under_its_claim(tmp_path):
    with exclusive_runs(tmp_path, JOBS, demo_holder()):
        with exclusive_runs(tmp_path, {"ingestion": "lakehouse/orders"}, catch_up_holder("run-1")):
            with exclusive_step(tmp_path, "ingestion", "lakehouse/orders", "run-1"):
                assert running(tmp_path, "ingestion") == demo_holder()
        assert running(tmp_path, "ingestion") == demo_holder()  # the demo's claim outlives its runs
    assert all(running(tmp_path, name) is None for name in JOBS)

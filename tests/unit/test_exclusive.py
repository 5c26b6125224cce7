"""The streaming jobs' locks: a run claims all of its jobs or none, and its steps run under its claim."""

from __future__ import annotations

import pytest

from lineage_assets.streaming.exclusive import (
    AlreadyRunning,
    catch_up_holder,
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

"""The benchmark harness runs and writes its results (a smoke test: no timing is asserted)."""

from __future__ import annotations

import json

from bench.run import main


def test_quick_emission_benchmark_writes_results(tmp_path):
    assert main(["--quick", "--only", "emission_latency", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "latest.json").read_text())
    (bench,) = results["benchmarks"]
    assert bench["name"] == "emission_latency"
    assert set(bench["cases"]) == {"up", "slow (2 s per request)", "down"}
    assert all(case["events"] == 500 and case["p50_ms"] <= case["p99_ms"] for case in bench["cases"].values())
    assert "| emission_latency |" in (tmp_path / "latest.md").read_text()

"""The benchmark harness runs and writes its results and chart (a smoke test: no timing is asserted)."""

from __future__ import annotations

import json

from bench.measure import growth_exponent
from bench.run import main
from bench.throughput import with_option


def test_quick_emission_benchmark_writes_results_and_chart(tmp_path):
    assert main(["--quick", "--only", "emission_latency", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "latest.json").read_text())
    (bench,) = results["benchmarks"]
    assert bench["name"] == "emission_latency"
    assert set(bench["cases"]) == {"up", "slow (2 s per request)", "down"}
    assert all(case["events"] == 500 and case["p50_ms"] <= case["p99_ms"] for case in bench["cases"].values())
    assert "| emission_latency |" in (tmp_path / "latest.md").read_text()
    assert (tmp_path / "latest.png").read_bytes().startswith(b"\x89PNG")


def test_growth_exponent_is_the_slope_in_log_log():
    assert round(growth_exponent([1, 4, 16], [2.0, 8.0, 32.0]), 6) == 1.0
    assert round(growth_exponent([1, 4, 16], [5.0, 5.0, 5.0]), 6) == 0.0


def test_with_option_replaces_or_appends_a_value():
    assert with_option(["--a", "1", "--b", "2"], "--a", "9") == ["--a", "9", "--b", "2"]
    assert with_option(["--a", "1"], "--c", "3") == ["--a", "1", "--c", "3"]


def test_the_warm_rate_is_the_records_of_the_commits_after_the_first_over_the_time_since_it():
    from bench.iceberg_tables import warm_rate

    assert warm_rate([(1_000, 500), (3_000, 150), (5_000, 250)]) == 100.0  # 400 records in 4 s
    assert warm_rate([(1_000, 500)]) is None  # one commit: no time after it


def test_rounded_keeps_a_round_that_measured_nothing():
    from bench.measure import rounded

    assert rounded({"peer": [1.234, None]}, 1) == {"peer": [1.2, None]}

"""Run the benchmarks and write ``bench/results/latest.json`` and ``latest.md``.

    python -m bench.run [--quick] [--only NAME ...]

Benchmarks that need servers get their own stack (state ``.state/bench``, ports shifted by 20000),
started here and stopped at the end. Results are ratios and percentiles measured in one run on this
machine; absolute seconds are only context.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import platform
import time
from pathlib import Path

from bench import emission, lineage_overhead
from lineage_assets.resources.lakehouse import LakehouseResource
from lineage_assets.settings import Settings
from lineage_assets.stack.supervisor import Supervisor

RESULTS = Path(__file__).parent / "results"
BENCH_PORT_OFFSET = 20000


def bench_settings() -> Settings:
    base = Settings.from_env()
    ports = {f.name: getattr(base, f.name) + BENCH_PORT_OFFSET for f in dataclasses.fields(Settings) if f.name.endswith("_port")}
    return dataclasses.replace(base, state_dir=base.state_dir / "bench", **ports)


def machine() -> dict:
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
            "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)}


def markdown(results: dict) -> str:
    lines = [f"Measured {results['finished']} on {results['machine']['cpus']} CPUs, "
             f"{results['machine']['memory_gib']} GiB ({'quick' if results['quick'] else 'full'} mode).", "",
             "| benchmark | result | target | met |", "|---|---|---|---|"]
    for bench in results["benchmarks"]:
        if bench["name"] == "emission_latency":
            value = ", ".join(f"{case}: p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms" for case, r in bench["cases"].items())
        elif bench["name"] == "lineage_overhead_batch":
            value = f"on/off ratio {bench['ratio']} (median {bench['median_on_s']} s vs {bench['median_off_s']} s)"
        else:
            value = json.dumps(bench)
        lines.append(f"| {bench['name']} | {value} | {bench['target']} | {'yes' if bench['met'] else 'no'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes and few rounds (a smoke run)")
    parser.add_argument("--only", nargs="*", choices=["emission_latency", "lineage_overhead_batch"])
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    logging.getLogger("lineage_assets.lineage.emitter").setLevel(logging.ERROR)  # "backend down" is the point
    wanted = set(args.only or ["emission_latency", "lineage_overhead_batch"])
    benchmarks = []
    if "emission_latency" in wanted:
        benchmarks.append(emission.run(args.quick))
    if "lineage_overhead_batch" in wanted:
        settings = bench_settings()
        supervisor = Supervisor(settings, progress=print)
        supervisor.up()
        try:
            benchmarks.append(lineage_overhead.run(LakehouseResource(overrides=settings.as_environment()), args.quick))
        finally:
            supervisor.down()
    results = {"finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "quick": args.quick,
               "machine": machine(), "benchmarks": benchmarks}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "latest.json").write_text(json.dumps(results, indent=2))
    (args.out / "latest.md").write_text(markdown(results))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Run the benchmarks and write ``bench/results/latest.json``, ``latest.md`` and ``latest.png``.

    python -m bench.run [--quick] [--only NAME ...] [size options]

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
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from bench import chart, cold_start, emission, freshness, lineage_overhead, scaling, throughput
from lineage_assets.resources.lakehouse import LakehouseResource
from lineage_assets.settings import Settings
from lineage_assets.stack.supervisor import Supervisor

RESULTS = Path(__file__).parent / "results"
BENCH_PORT_OFFSET = 20000


@dataclasses.dataclass(frozen=True)
class Benchmark:
    module: ModuleType  # its run(...) gives a result dict, its summary(result) one line of markdown
    sizes: Callable[[argparse.Namespace], dict] = lambda args: {}  # run()'s size arguments from the command line
    needs_stack: bool = True


BENCHMARKS = {
    "emission_latency": Benchmark(emission, needs_stack=False),
    "lineage_overhead_batch": Benchmark(lineage_overhead),
    "streaming_throughput": Benchmark(throughput, lambda args: {"count": args.throughput_orders}),
    "freshness": Benchmark(freshness, lambda args: {"seconds": args.freshness_seconds}),
    "batch_scaling": Benchmark(scaling, lambda args: {"sizes": args.scaling_sizes}),
    "cold_start": Benchmark(cold_start, lambda args: {"orders": args.cold_start_orders}),
}


def bench_settings() -> Settings:
    base = Settings.from_env()
    ports = {f.name: getattr(base, f.name) + BENCH_PORT_OFFSET for f in dataclasses.fields(Settings) if f.name.endswith("_port")}
    return dataclasses.replace(base, state_dir=base.state_dir / "bench", **ports)


def machine() -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    return {"cpus": os.cpu_count(), "cpu_model": cpu, "python": platform.python_version(), "platform": platform.platform(),
            "java": java[0] if java else None, "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
            "load_average_at_start": [round(load, 2) for load in os.getloadavg()]}


def markdown(results: dict) -> str:
    info = results["machine"]
    lines = [f"Measured {results['finished']} on {info['cpus']} CPUs ({info['cpu_model']}), {info['memory_gib']} GiB, "
             f"{info['java']} ({'quick' if results['quick'] else 'full'} mode, {results['elapsed_s'] / 60:.1f} min; "
             f"load average at start {info['load_average_at_start'][0]}).", "",
             "| benchmark | result | target | met | took |", "|---|---|---|---|---|"]
    for bench in results["benchmarks"]:
        met = {True: "yes", False: "no", None: "—"}[bench["met"]]
        value = f"failed: {bench['error']}" if "error" in bench else BENCHMARKS[bench["name"]].module.summary(bench)
        lines.append(f"| {bench['name']} | {value} | {bench['target']} | {met} | {bench['elapsed_s'] / 60:.1f} min |")
    return "\n".join(lines) + "\n"


def run_one(name: str, args: argparse.Namespace, lakehouse: LakehouseResource) -> dict:
    """The benchmark's result; a failure is recorded (and the run goes on to the next benchmark)."""
    benchmark = BENCHMARKS[name]
    print(f"bench: {name}", flush=True)
    started = time.monotonic()
    try:
        if benchmark.needs_stack:
            result = benchmark.module.run(lakehouse, args.quick, **benchmark.sizes(args))
        else:
            result = benchmark.module.run(args.quick)
    except Exception as error:  # noqa: BLE001 (one benchmark's failure must not lose the others' results)
        logging.exception("bench: %s failed", name)
        result = {"name": name, "target": "", "met": False, "error": f"{type(error).__name__}: {error}"}
    return {**result, "elapsed_s": round(time.monotonic() - started, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes and few rounds (a smoke run)")
    parser.add_argument("--only", nargs="*", choices=list(BENCHMARKS))
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--throughput-orders", type=int, help="orders in the throughput topic (quick 20,000; full 300,000)")
    parser.add_argument("--freshness-seconds", type=int, help="seconds of measured orders (quick 20; full 120)")
    parser.add_argument("--scaling-sizes", type=int, nargs="+",
                        help="orders per day (quick 10,000 160,000; full 1,000,000 4,000,000 16,000,000)")
    parser.add_argument("--cold-start-orders", type=int, help="orders in the cold-start day (quick 10,000; full 1,000,000)")
    args = parser.parse_args(argv)
    logging.getLogger("lineage_assets.lineage.emitter").setLevel(logging.ERROR)  # "backend down" is the point
    wanted = [name for name in BENCHMARKS if name in (args.only or BENCHMARKS)]
    started = time.monotonic()
    info = machine()
    settings = bench_settings()
    lakehouse = LakehouseResource(overrides=settings.as_environment())
    supervisor = Supervisor(settings, progress=print) if any(BENCHMARKS[name].needs_stack for name in wanted) else None
    if supervisor:
        supervisor.up()
    try:
        benchmarks = [run_one(name, args, lakehouse) for name in wanted]
    finally:
        if supervisor:
            supervisor.down()
    results = {"finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "quick": args.quick, "machine": info,
               "elapsed_s": round(time.monotonic() - started, 1), "benchmarks": benchmarks}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "latest.json").write_text(json.dumps(results, indent=2))
    (args.out / "latest.md").write_text(markdown(results))
    chart.draw(results, args.out / "latest.png")
    print(markdown(results))
    return 1 if any("error" in bench for bench in benchmarks) else 0


if __name__ == "__main__":
    raise SystemExit(main())

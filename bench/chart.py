"""The results as one PNG: each benchmark's figure against its target (dashed), and the scaling curve."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display: files only
import matplotlib.pyplot as plt  # noqa: E402 (after choosing the backend)

from bench import cold_start  # noqa: E402
from bench import memory as memory_bench  # noqa: E402


def _bars(ax, labels: list[str], values: list[float], target: float | None, title: str, unit: str) -> None:
    ax.bar(labels, values, color="tab:blue")
    if target is not None:
        ax.axhline(target, color="tab:red", linestyle="--", label=f"target {target:g}{unit}")
        ax.legend(loc="best", fontsize=8)
    ax.set_title(title, fontsize=10)
    ax.tick_params(axis="x", labelsize=8)
    for x, value in enumerate(values):
        ax.annotate(f"{value:g}", (x, value), ha="center", va="bottom", fontsize=8)


def emission(ax, result: dict) -> None:
    cases = result["cases"]
    _bars(
        ax,
        [case.split(" ")[0] for case in cases],
        [r["p99_ms"] for r in cases.values()],
        1.0,
        "emission latency p99 (ms), lower is better",
        " ms",
    )


def lineage_overhead(ax, result: dict) -> None:
    """The paired ratio, its 95 % interval as an error bar when the rounds give one."""
    paired = result["paired"]
    _bars(ax, ["lineage on / off"], [paired["ratio"]], 1.03, "batch lineage overhead (ratio), lower is better", "")
    if paired["low"] is not None:
        ax.errorbar(
            [0],
            [paired["ratio"]],
            yerr=[[paired["ratio"] - paired["low"]], [paired["high"] - paired["ratio"]]],
            fmt="none",
            ecolor="black",
            capsize=6,
        )


def throughput(ax, result: dict) -> None:
    """Each job's rate beside its Flink and Kafka Connect peers', in thousands of orders/s; the two raw
    consumers dashed."""
    connect = result.get("connect_peer_rows_per_s", {})
    rates = {**result["median_rows_per_s"], **{f"connect_{name}": rate for name, rate in connect.items() if rate}}
    baselines = {
        "ceiling": ("Kafka's consumer (ceiling)", "tab:red"),
        "python_consumer": ("Python consumer", "tab:gray"),
    }
    jobs = [name for name in rates if name not in baselines and not name.startswith(("flink_", "connect_"))]
    sides = (
        ("project (PySpark)", jobs),
        ("Flink peer", [f"flink_{n}" for n in jobs]),
        ("Kafka Connect peer", [f"connect_{n}" for n in jobs]),
    )
    width = 0.28
    for offset, (label, names) in enumerate(sides):
        xs = [x + (offset - 1) * width for x in range(len(jobs))]
        values = [rates[name] / 1000 if name in rates else 0 for name in names]
        ax.bar(xs, values, width, label=label)
        for x, value, name in zip(xs, values, names):
            if name in rates:
                ax.annotate(f"{value:.0f}", (x, value), ha="center", va="bottom", fontsize=8)
    for name, (label, colour) in baselines.items():
        if rates.get(name):
            ax.axhline(rates[name] / 1000, color=colour, linestyle="--", label=label)
    # Wrapped: the continuous subjects' names are longer than their bars are wide.
    ax.set_xticks(range(len(jobs)), [textwrap.fill(name.replace("_", " "), 12) for name in jobs], fontsize=8)
    ax.set_title(f"streaming throughput, k orders/s ({result['orders']:,} orders), higher is better", fontsize=10)
    ax.legend(loc="best", fontsize=7)


def freshness(ax, result: dict) -> None:
    where = {"table": "table", "window": "window", "window_flink_peer": "Flink window"}
    values = {f"{label} {q}": result[key][f"{q}_s"] for key, label in where.items() for q in ("p50", "p95")}
    _bars(
        ax,
        [textwrap.fill(label, 12) for label in values],
        [v if v is not None else 0 for v in values.values()],
        None,
        "freshness (s from produce), lower is better",
        "",
    )


def scaling(ax, result: dict) -> None:
    sizes = [m["orders"] for m in result["sizes"]]
    for key, label in (
        ("median_asset_s", f"asset (exponent {result['exponent_asset']})"),
        ("median_floor_s", f"bare spark-submit (exponent {result['exponent_floor']})"),
    ):
        ax.plot(sizes, [m[key] for m in result["sizes"]], marker="o", label=label)
    for m in result["sizes"]:
        ax.annotate(
            f"×{m['ratio']:g}",
            (m["orders"], m["median_asset_s"]),
            textcoords="offset points",
            xytext=(0, 6),
            ha="center",
            fontsize=8,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("orders in the day", fontsize=8)
    ax.set_ylabel("seconds", fontsize=8)
    ax.set_title("batch scaling: supplier_stats (ratio asset / floor)", fontsize=10)
    ax.legend(fontsize=8)


def cold(ax, result: dict) -> None:
    runs = result["median_phases_s"]
    left = {name: 0.0 for name in runs}
    for phase in cold_start.PHASES:
        widths = [runs[name][phase] for name in runs]
        ax.barh(
            list(runs), widths, left=[left[name] for name in runs], label=phase.removesuffix("_s").replace("_", " ")
        )
        for name, width in zip(runs, widths):
            left[name] += width
    ax.set_xlabel(
        f"seconds (median); class loading {runs['dagster_cli']['class_loading_s']} s inside the Spark phases",
        fontsize=8,
    )
    ax.set_title(f"cold start: CLI / bare {result['ratio']} (target <= {cold_start.TARGET_RATIO})", fontsize=10)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=3)


def memory(ax, result: dict) -> None:
    """What made up the demo's peak (every process's RSS summed), against the target."""
    parts = result["peak_composition_mib"]
    ax.barh(list(parts), [mib / 1024 for mib in parts.values()], color="tab:blue")
    ax.invert_yaxis()
    ax.tick_params(axis="y", labelsize=7)
    ax.set_xlabel(
        f"GiB at the peak; the peak {result['peak_total_gib']} GiB, target {memory_bench.TARGET_GIB:g}", fontsize=8
    )
    ax.set_title("memory: the stack and the demo's processes at their summed peak", fontsize=10)


PANELS = {
    "emission_latency": emission,
    "lineage_overhead_batch": lineage_overhead,
    "streaming_throughput": throughput,
    "freshness": freshness,
    "batch_scaling": scaling,
    "cold_start": cold,
    "memory": memory,
}


def draw(results: dict, path: Path) -> None:
    drawn = [bench for bench in results["benchmarks"] if bench["name"] in PANELS and "error" not in bench]
    rows = max(1, math.ceil(len(drawn) / 2))
    figure, axes = plt.subplots(rows, 2, figsize=(13, 4 * rows), squeeze=False)
    for ax, bench in zip(axes.flat, drawn):
        PANELS[bench["name"]](ax, bench)
    for ax in list(axes.flat)[len(drawn) :]:
        ax.axis("off")
    figure.suptitle(
        f"lineage_assets benchmarks, {results['finished']} ({'quick' if results['quick'] else 'full'} mode)"
    )
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)

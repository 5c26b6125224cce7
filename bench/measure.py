"""What every benchmark measures with: alternated rounds, paired ratios and their intervals,
percentiles, medians, growth exponents."""

from __future__ import annotations

import math
import resource
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

M = TypeVar("M")  # what one round of a subject measures: seconds, a rate, or None when it measured nothing


def alternate(rounds: int, subjects: Mapping[str, Callable[[int], M]], balanced: bool = False) -> dict[str, list[M]]:
    """Each subject measured once per round, in turn (baseline first), so drift hits all alike;
    ``balanced`` reverses the turn every other round (ABBA), so a steady drift favours no side."""
    values: dict[str, list[M]] = {name: [] for name in subjects}
    for round_number in range(rounds):
        turn = list(subjects.items())
        for name, measure in reversed(turn) if balanced and round_number % 2 else turn:
            values[name].append(measure(round_number))
    return values


def wall_seconds(action: Callable[[int], object]) -> Callable[[int], float]:
    """A subject measuring the wall time of ``action(round_number)``."""

    def measure(round_number: int) -> float:
        started = time.monotonic()
        action(round_number)
        return time.monotonic() - started

    return measure


def cpu_seconds() -> float:
    """The CPU time this process and its ended children (and theirs) have used so far."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def paired_ratio(ours: Sequence[float | None], theirs: Sequence[float | None], confidence: float = 0.95) -> dict:
    """The ratio ours/theirs over rounds measured in pairs: the geometric mean of each round's ratio,
    with Student's t interval of the log ratios (a ratio's spread is symmetric in log space, and
    pairing cancels the drift both sides of a round share). A round either side measured nothing
    (None) is left out."""
    from scipy import stats  # a benchmark's dependency only (the `bench` extra)

    logs = [math.log(a / b) for a, b in zip(ours, theirs) if a is not None and b is not None]
    if not logs:
        return {"ratio": None, "low": None, "high": None, "rounds": 0, "confidence": confidence}
    center = statistics.fmean(logs)
    if len(logs) < 2:
        return {"ratio": round(math.exp(center), 4), "low": None, "high": None, "rounds": 1, "confidence": confidence}
    half = stats.t.ppf((1 + confidence) / 2, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return {
        "ratio": round(math.exp(center), 4),
        "low": round(math.exp(center - half), 4),
        "high": round(math.exp(center + half), 4),
        "rounds": len(logs),
        "confidence": confidence,
    }


def interval_text(paired: dict) -> str:
    """A paired ratio as the summaries print it: ``1.02 (95 % CI 0.99-1.05, 8 rounds)``."""
    if paired["low"] is None:
        return f"{paired['ratio']} ({paired['rounds']} round)"
    return (
        f"{paired['ratio']} ({paired['confidence']:.0%} CI {paired['low']}-{paired['high']}, {paired['rounds']} rounds)"
    )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def median(values: list[float], digits: int = 3) -> float:
    return round(statistics.median(values), digits)


def rounded(values: Mapping[str, Sequence[float | None]], digits: int = 3) -> dict[str, list[float | None]]:
    """Each series rounded; a round that measured nothing (None) stays None."""
    return {name: [None if v is None else round(v, digits) for v in series] for name, series in values.items()}


def growth_exponent(sizes: list[int], seconds: list[float]) -> float:
    """Least-squares slope of log(time) against log(size): 1 is linear, 0 is a fixed cost."""
    xs, ys = [math.log(s) for s in sizes], [math.log(t) for t in seconds]
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / sum((x - mean_x) ** 2 for x in xs)

"""What every benchmark measures with: alternated rounds, percentiles, medians, growth exponents."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

M = TypeVar("M")  # what one round of a subject measures: seconds, a rate, or None when it measured nothing


def alternate(rounds: int, subjects: Mapping[str, Callable[[int], M]]) -> dict[str, list[M]]:
    """Each subject measured once per round, in turn (baseline first), so drift hits all alike."""
    values: dict[str, list[M]] = {name: [] for name in subjects}
    for round_number in range(rounds):
        for name, measure in subjects.items():
            values[name].append(measure(round_number))
    return values


def wall_seconds(action: Callable[[int], object]) -> Callable[[int], float]:
    """A subject measuring the wall time of ``action(round_number)``."""

    def measure(round_number: int) -> float:
        started = time.monotonic()
        action(round_number)
        return time.monotonic() - started

    return measure


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

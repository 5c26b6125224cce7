"""The benchmarks' own Iceberg tables, through pyiceberg on the stack's REST catalog: dropped
before a run, read back to check that two jobs wrote the same rows, and their commits timed."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable

from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table.snapshots import Snapshot

from lineage_assets.settings import Settings


def catalog(settings: Settings) -> Catalog:
    return load_catalog(
        "bench",
        **{
            "type": "rest",
            "uri": settings.iceberg_catalog_url,
            "warehouse": settings.warehouse_url,
            "s3.endpoint": settings.s3_url,
            "s3.access-key-id": settings.s3_access_key,
            "s3.secret-access-key": settings.s3_secret_key,
            "s3.region": settings.s3_region,
            "s3.force-virtual-addressing": "false",
        },
    )


def drop(settings: Settings, table: str) -> None:
    """Drop the table and its files; nothing to do when it does not exist."""
    try:
        catalog(settings).purge_table((settings.iceberg_namespace, table))
    except NoSuchTableError:
        pass


def first_difference(settings: Settings, table: str, reference: str, columns: tuple[str, ...]) -> tuple | None:
    """None when ``table`` holds the same rows of ``columns`` as ``reference`` (in any order); else the
    first pair of rows, in sorted order, that differ (``table``'s, then ``reference``'s; None past its end).
    Compared in Arrow, column by column (values, not the tables' nullability): a continuous run's
    table has millions of rows."""
    ordering = [(name, "ascending") for name in columns]
    written, expected = (
        catalog(settings)
        .load_table((settings.iceberg_namespace, name))
        .scan(selected_fields=columns)
        .to_arrow()
        .select(list(columns))
        .sort_by(ordering)
        for name in (table, reference)
    )
    if written.num_rows == expected.num_rows and all(written[name].equals(expected[name]) for name in columns):
        return None
    ours, theirs = (zip(*(part[name].to_pylist() for name in columns)) for part in (written, expected))
    # None too when Arrow's types differ but every value is equal as Python compares them.
    return next((pair for pair in itertools.zip_longest(ours, theirs) if pair[0] != pair[1]), None)


def _summary_count(table: str, snapshot: Snapshot, name: str) -> int:
    """A count of the snapshot's summary; a snapshot without one is an error (Iceberg's writers always write it)."""
    if snapshot.summary is None:
        raise RuntimeError(f"{table}: snapshot {snapshot.snapshot_id} has no summary to read {name} from")
    return int(snapshot.summary.additional_properties.get(name, 0))


def row_count(settings: Settings, table: str) -> int:
    """The rows of the table's current snapshot, from its summary (the tables here are only appended to)."""
    snapshot = catalog(settings).load_table((settings.iceberg_namespace, table)).current_snapshot()
    return _summary_count(table, snapshot, "total-records") if snapshot else 0


def commits(settings: Settings, table: str) -> list[tuple[int, int]]:
    """(commit time in ms, records added) of each of the table's snapshots that added records, oldest first."""
    try:
        snapshots = catalog(settings).load_table((settings.iceberg_namespace, table)).snapshots()
    except NoSuchTableError:
        return []
    added = ((snapshot.timestamp_ms, _summary_count(table, snapshot, "added-records")) for snapshot in snapshots)
    return sorted(commit for commit in added if commit[1])


def await_rows(
    settings: Settings, table: str, count: int, running: Callable[[], bool], timeout_s: float = 900
) -> list[tuple[int, int]]:
    """Wait until the table's commits have added ``count`` records; returns the commits. Fails when the
    writer stops running first, or after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = commits(settings, table)
        if (committed := sum(added for _, added in found)) >= count:
            return found
        if not running() or time.monotonic() > deadline:
            raise RuntimeError(
                f"{table} has {committed} of {count} records committed, and its writer "
                + ("stopped" if not running() else f"took over {timeout_s} s")
            )
        time.sleep(0.5)


def warm_rate(commits: list[tuple[int, int]]) -> float | None:
    """Records/s of a continuous writer once it runs: the records its commits after the first added,
    over the time from the first commit to the last (the first commit carries the start and warm-up).
    None with fewer than two commits."""
    if len(commits) < 2:
        return None
    return sum(added for _, added in commits[1:]) / ((commits[-1][0] - commits[0][0]) / 1000)

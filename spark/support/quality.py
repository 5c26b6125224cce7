"""The quality numbers of what a job writes (rows, bytes, files; per column nulls, min and max): from
the records as a streaming query writes them, or from an Iceberg table's file metadata, never from
another pass over the data."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import NumericType, StructType

from spark.support.reports import column_entry, quality_entry


def numeric_columns(schema: StructType, names: tuple[str, ...] | None = None) -> dict[str, bool]:
    """Whether each column of ``schema`` (or each of ``names``, in that order) is numeric."""
    numeric = {f.name: isinstance(f.dataType, NumericType) for f in schema.fields}
    if missing := [name for name in names or () if name not in numeric]:
        raise ValueError(f"no column {', '.join(map(repr, missing))} in {', '.join(numeric)}")
    return numeric if names is None else {name: numeric[name] for name in names}


def column_aggregates(numeric: dict[str, bool], where: Column | None = None) -> dict[str, Column]:
    """Per column: its nulls, and the min and max of a numeric one, as aggregates named (and keyed)
    ``column:nulls|min|max``; over the rows ``where`` holds (all rows without it)."""
    aggregates = {}
    for name, is_numeric in numeric.items():
        column = F.col(f"`{name}`")
        aggregates[f"{name}:nulls"] = F.count_if(column.isNull() if where is None else where & column.isNull())
        if is_numeric:
            counted = column if where is None else F.when(where, column)
            aggregates |= {f"{name}:min": F.min(counted), f"{name}:max": F.max(counted)}
    return {key: aggregate.alias(key) for key, aggregate in aggregates.items()}


class ColumnMetrics:
    """Per column of the records a streaming query writes: nulls, and min and max of numeric columns,
    observed in each batch as it is written (no second pass over the data), summed over the run."""

    OBSERVATION = "column_metrics"  # the name of the per-batch metrics observed on a streaming query

    def __init__(self) -> None:
        self.numeric: dict[str, bool] = {}  # the observed columns: is each numeric
        self.batches: dict[int, dict] = {}  # batch id -> "column:nulls|min|max" -> value (a replayed batch counts once)

    def observed(self, records: DataFrame) -> DataFrame:
        """``records`` with their per-column metrics counted in each batch's progress."""
        self.numeric = numeric_columns(records.schema)
        return records.observe(self.OBSERVATION, *column_aggregates(self.numeric).values())

    def count_observed(self, progress) -> None:
        metrics = (progress.observedMetrics or {}).get(self.OBSERVATION)
        if metrics is not None:
            self.batches[progress.batchId] = metrics.asDict()

    def summary(self) -> dict:
        """Each column's metrics over every batch of the run, as ``quality_entry`` spells them."""

        def values(key: str) -> list:
            return [batch[key] for batch in self.batches.values() if batch.get(key) is not None]

        return {
            name: column_entry(
                sum(values(f"{name}:nulls")),
                min(values(f"{name}:min"), default=None) if numeric else None,
                max(values(f"{name}:max"), default=None) if numeric else None,
            )
            for name, numeric in self.numeric.items()
        }


def files_totals(files: DataFrame) -> tuple[dict, list[str]]:
    """The totals of an Iceberg table's ``files`` metadata table that its ``quality`` entry is made
    of (``table_quality_entry``), and its columns: the manifests' record counts, file sizes and
    per-column statistics (``readable_metrics``), never the data."""
    metrics = files.schema["readable_metrics"].dataType
    if not isinstance(metrics, StructType):
        raise ValueError(f"the files table's readable_metrics is {metrics.simpleString()}, not a struct of columns")
    numeric = {
        c.name
        for c in metrics.fields
        if isinstance(c.dataType, StructType) and isinstance(c.dataType["lower_bound"].dataType, NumericType)
    }
    aggregates = [
        F.count_if(F.col("content") != 0).alias("delete_files"),
        F.count(F.lit(1)).alias("files"),
        F.sum("record_count").alias("rows"),
        F.sum("file_size_in_bytes").alias("bytes"),
    ]
    for name in metrics.fieldNames():
        column = F.col("readable_metrics")[name]
        aggregates += [
            F.sum(column["null_value_count"]).alias(f"{name}:nulls"),
            F.count(column["null_value_count"]).alias(f"{name}:counted"),
        ]
        if name in numeric:
            unbounded = column["lower_bound"].isNull() & ~column["null_value_count"].eqNullSafe(F.col("record_count"))
            aggregates += [
                F.min(column["lower_bound"]).alias(f"{name}:min"),
                F.max(column["upper_bound"]).alias(f"{name}:max"),
                F.count_if(unbounded).alias(f"{name}:unbounded"),
            ]
    return files.agg(*aggregates).collect()[0].asDict(), metrics.fieldNames()


def table_quality_entry(totals: dict, columns: list[str]) -> dict | None:
    """A table's ``quality`` entry from the totals of its files (``files_totals``:
    ``column:nulls|counted|min|max|unbounded``).

    Each number is exact or left out: a column's nulls when every file counted them, its min and max
    when it is numeric (other bounds are not numbers, and strings' are truncated) and every file
    with a value in it has bounds. None when the table has delete files: rows deleted by them are
    still in the data files' counts."""
    if totals["delete_files"]:
        return None

    def column(name: str) -> dict:
        nulls = (totals[f"{name}:nulls"] or 0) if totals[f"{name}:counted"] == totals["files"] else None
        if totals.get(f"{name}:unbounded"):
            return column_entry(nulls)
        return column_entry(nulls, totals.get(f"{name}:min"), totals.get(f"{name}:max"))

    return quality_entry(
        totals["rows"] or 0, totals["bytes"] or 0, totals["files"], {name: column(name) for name in columns}
    )


def totals_after_append(totals: dict, summary: dict[str, str], appended: dict) -> dict:
    """``files_totals`` of a table after an append to the snapshot they are of: the new snapshot's
    summary (Iceberg's running totals of files, rows, bytes and delete files; the data files it
    added) and the appended records' ``column_aggregates``, observed as they were written. Their
    nulls are counted in every new file; their min and max are exact."""
    added_files = int(summary.get("added-data-files", "0"))  # absent from an empty commit's
    after = {
        **totals,
        "files": int(summary["total-data-files"]),
        "rows": int(summary["total-records"]),
        "bytes": int(summary["total-files-size"]),
        "delete_files": int(summary["total-delete-files"]),
    }
    for key, value in appended.items():
        name, metric = key.rsplit(":", 1)
        before = totals.get(key)
        if metric == "nulls":
            after[key], after[f"{name}:counted"] = (before or 0) + value, totals[f"{name}:counted"] + added_files
        elif value is not None:
            after[key] = value if before is None else (min if metric == "min" else max)(before, value)
    return after

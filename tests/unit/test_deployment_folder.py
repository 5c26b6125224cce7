"""What a deployment's folder says of its output, from its Spark job's progress file (no servers)."""

from __future__ import annotations

import json

from lineage_assets.lineage.run_facts import DatasetVersion, OffsetRange, WrittenFile
from lineage_assets.settings import Settings
from lineage_assets.streaming.folder import DeploymentFolder

TABLE_QUALITY = {"rows": 42, "bytes": 9000, "files": 3, "columns": {"price": {"nulls": 0, "min": 1.0, "max": 99.5}}}


def folder_with(tmp_path, *records: dict) -> DeploymentFolder:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "progress.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    return DeploymentFolder(tmp_path)


def test_an_ingestion_reports_the_table_at_its_latest_commit_that_wrote_rows(tmp_path):
    folder = folder_with(
        tmp_path,
        {
            "event": "committed",
            "batch": 0,
            "rows": 40,
            "snapshot_id": 11,
            "parent_snapshot_id": 10,  # the table's snapshot when the run began
            "schema_id": 0,
            "quality": {**TABLE_QUALITY, "rows": 40},
        },
        {"event": "progress", "batch": 0, "rows": 40},
        {
            "event": "committed",
            "batch": 1,
            "rows": 2,
            "snapshot_id": 12,
            "parent_snapshot_id": 10,
            "schema_id": 1,
            "quality": TABLE_QUALITY,
        },
        {"event": "committed", "batch": 2, "rows": 0, "dead_letters": 3},  # dead letters only: the table is unchanged
    )
    # Its version: the latest commit's snapshot, built on the table as the run found it.
    assert folder.output_written() == (DatasetVersion("12", 1, parent="10"), TABLE_QUALITY)


def test_an_archive_reports_the_columns_of_what_it_wrote_so_far(tmp_path):
    columns = {"key": {"nulls": 0}, "offset": {"nulls": 0, "min": 0.0, "max": 9.0}}
    folder = folder_with(
        tmp_path,
        {"event": "progress", "batch": 0, "rows": 4, "columns": {"key": {"nulls": 0}}},
        {"event": "progress", "batch": 1, "rows": 6, "columns": columns},
    )
    assert folder.output_written() == (None, {"rows": 10, "bytes": None, "files": None, "columns": columns})


def test_a_job_that_reports_neither_has_no_output_metrics(tmp_path):
    assert folder_with(tmp_path, {"event": "progress", "batch": 0, "rows": 5}).output_written() == (None, None)
    assert DeploymentFolder(tmp_path / "never-ran").output_written() == (None, None)


def test_a_deployment_reads_from_its_first_batchs_start_to_its_latest_batchs_end(tmp_path):
    folder = folder_with(
        tmp_path,
        {"event": "progress", "batch": 0, "rows": 0},  # no source offsets yet
        {
            "event": "progress",
            "batch": 1,
            "rows": 5,
            "start_offsets": {"orders": {"0": 10}},
            "end_offsets": {"orders": {"0": 15}},
        },
        {
            "event": "progress",
            "batch": 2,
            "rows": 3,
            "start_offsets": {"orders": {"0": 15}},
            "end_offsets": {"orders": {"0": 18}},
        },
    )
    facts = folder.facts(Settings(), folder.progress_facet())
    (read,) = facts.reads
    assert read.offsets == (OffsetRange(0, 10, 18),) and facts.statistics.rows == 8


def test_a_deployment_names_the_offsets_it_wrote_to_a_topic_and_the_files_it_added(tmp_path):
    start = {"supplier-stats": {"0": 7}}
    live = folder_with(
        tmp_path / "live",
        {"event": "progress", "batch": 0, "rows": 4, "output_start_offsets": start, "output_end_offsets": start},
        {
            "event": "progress",
            "batch": 1,
            "rows": 6,
            "output_start_offsets": start,
            "output_end_offsets": {"supplier-stats": {"0": 12}},
        },
    )
    facts = live.facts(Settings(), live.progress_facet())
    assert facts.offsets == (OffsetRange(0, 7, 12),) and facts.files is None
    archive = folder_with(
        tmp_path / "archive",
        {"event": "progress", "batch": 0, "rows": 4, "files_added": [["date=2026-11-21/hour=10/part-0.json", 90]]},
        {"event": "progress", "batch": 1, "rows": 0, "files_added": []},
        {"event": "progress", "batch": 2, "rows": 2, "files_added": [["date=2026-11-21/hour=11/part-0.json", 40]]},
    )
    facts = archive.facts(Settings(), archive.progress_facet())
    assert facts.files == (
        WrittenFile("date=2026-11-21/hour=10/part-0.json", 90),
        WrittenFile("date=2026-11-21/hour=11/part-0.json", 40),
    )
    assert facts.offsets is None


def test_each_event_names_the_files_added_since_the_last_event_that_named_files(tmp_path):
    """A long-running archive adds thousands of files a day: each RUNNING event names only the new ones."""
    first = {"event": "progress", "batch": 0, "rows": 4, "files_added": [["hour=10/part-0.json", 90]]}
    folder = folder_with(tmp_path, first)
    sent = folder.facts(Settings(), folder.progress_facet())
    assert sent.files == (WrittenFile("hour=10/part-0.json", 90),)
    folder.reported(sent)
    later = {"event": "progress", "batch": 1, "rows": 2, "files_added": [["hour=11/part-0.json", 40]]}
    folder_with(tmp_path, first, later)
    assert folder.facts(Settings(), folder.progress_facet()).files == (WrittenFile("hour=11/part-0.json", 40),)
    folder.clear_run()  # a new run names its own files from the first
    folder_with(tmp_path, first)
    assert folder.facts(Settings(), folder.progress_facet()).files == sent.files


def test_a_running_event_carries_the_column_lineage_only_when_the_run_has_not_sent_it(tmp_path):
    """Each RUNNING event repeated the whole column lineage: most of a deployment's lineage log."""
    observed = {
        "columns": {
            "item": [{"source": "kafka:orders", "field": "value.item", "type": "DIRECT", "subtype": "IDENTITY"}]
        },
        "derivations": {"item": "decoded(«kafka:orders|value»).item"},
        "dataset": [],
        "unresolved": [],
    }
    lineage = {"event": "lineage", "column_lineage": observed}
    folder = folder_with(tmp_path, lineage)
    folder.write_spec({"dataset": "lakehouse/orders"})
    first = folder.facts(Settings(), folder.progress_facet(), repeat_lineage=False)
    assert first.column_lineage is not None
    folder.reported(first)
    assert folder.facts(Settings(), folder.progress_facet(), repeat_lineage=False).column_lineage is None
    assert folder.facts(Settings(), folder.progress_facet()).column_lineage == first.column_lineage  # its end
    changed = {
        "columns": {**observed["columns"], "supplier": observed["columns"]["item"]},
        "derivations": {**observed["derivations"], "supplier": "decoded(«kafka:orders|value»).item"},
    }
    folder_with(tmp_path, lineage, {"event": "lineage", "column_lineage": {**observed, **changed}})
    again = folder.facts(Settings(), folder.progress_facet(), repeat_lineage=False).column_lineage
    assert again is not None and set(again) == {"item", "supplier"}

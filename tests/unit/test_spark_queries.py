"""A streaming job's run as its report tells it (``spark/support``): every batch's rows and the source
offsets from its first batch's start to its last batch's end, and the files it added to a sink."""

from __future__ import annotations

import argparse
import json

from spark.support import queries, tables
from spark.support.arguments import CATCH_UP
from tests.conftest import wait_for


def test_a_catch_up_run_reports_every_batch_its_offsets_and_the_files_it_added(spark, tmp_path):
    source, sink = tmp_path / "in", tmp_path / "out"
    source.mkdir()
    for number in range(3):
        (source / f"{number}.json").write_text("".join(json.dumps({"n": number * 10 + i}) + "\n" for i in range(4)))
    records = spark.readStream.schema("n INT").option("maxFilesPerTrigger", 1).json(str(source))
    writer = (
        records.writeStream.format("json").option("path", str(sink)).option("checkpointLocation", str(tmp_path / "cp"))
    )
    args = argparse.Namespace(mode=CATCH_UP, progress_file=None, drain_file=None)
    before = tables.files_under(spark, str(sink))

    _, summary = queries.run_query(writer, args, spark)

    assert (summary["batches"], summary["rows_in"]) == (3, 12)  # one file a batch
    # A file source's first batch starts nowhere (a Kafka source's, at the offsets it starts from).
    assert summary["start_offsets"] is None and summary["end_offsets"] == {"logOffset": 2}
    added = set(tables.files_under(spark, str(sink))) - set(before)
    assert len(added) == 3 and all(path.endswith(".json") and "/" not in path for path in added)
    assert sum(len((sink / path).read_text().splitlines()) for path in added) == 12


def test_each_batch_names_the_files_it_added_from_the_sinks_log(spark, tmp_path):
    """What a deployment's progress reports batch by batch: the files each batch's entry in the file
    sink's log lists, together those the sink holds."""
    source, sink, progress = tmp_path / "in", tmp_path / "out", tmp_path / "progress.jsonl"
    source.mkdir()
    for number in range(3):
        (source / f"{number}.json").write_text(json.dumps({"n": number}) + "\n")
    records = spark.readStream.schema("n INT").option("maxFilesPerTrigger", 1).json(str(source))
    writer = (
        records.writeStream.format("json").option("path", str(sink)).option("checkpointLocation", str(tmp_path / "cp"))
    )
    args = argparse.Namespace(mode=CATCH_UP, progress_file=str(progress), drain_file=None)

    def files_added(batch: int) -> dict:
        return {
            "files_added": sorted([path, size] for path, size in tables.sink_files(spark, str(sink), batch).items())
        }

    queries.run_query(writer, args, spark, written=files_added)

    def batches() -> list[list]:
        lines = progress.read_text().splitlines() if progress.exists() else []
        return [record["files_added"] for record in map(json.loads, lines) if record["event"] == "progress"]

    per_batch = wait_for(lambda: len(batches()) == 3 and batches(), 30, "three progress records")
    assert [len(files) for files in per_batch] == [1, 1, 1]
    assert {path: size for files in per_batch for path, size in files} == tables.files_under(spark, str(sink))


def test_a_batch_the_job_reads_twice_counts_its_records_once(spark, tmp_path, capsys):
    """As the ingestion reads a batch again for its dead letters: Spark's ``numInputRows`` counts the
    source's rows once per execution, the run's report the records the job says each batch had."""
    source = tmp_path / "in"
    source.mkdir()
    for number in range(2):
        (source / f"{number}.json").write_text("".join(json.dumps({"n": number * 10 + i}) + "\n" for i in range(5)))
    counted: dict[int, int] = {}

    def read_twice(batch, batch_id: int) -> None:
        counted[batch_id] = batch.count()
        assert batch.filter("n % 2 = 0").count() <= counted[batch_id]  # the second read

    records = spark.readStream.schema("n INT").option("maxFilesPerTrigger", 1).json(str(source))
    writer = records.writeStream.foreachBatch(read_twice).option("checkpointLocation", str(tmp_path / "cp"))
    args = argparse.Namespace(mode=CATCH_UP, progress_file=None, drain_file=None)

    query, summary = queries.run_query(writer, args, spark, read=counted)

    assert sum(progress.numInputRows for progress in query.recentProgress) == 20  # each file's five rows, twice
    assert (summary["batches"], summary["rows_in"]) == (2, 10)
    printed: list[str] = []  # the listener says the query ended once Spark's event reaches it
    ended = "query ended after 10 rows"
    wait_for(lambda: printed.append(capsys.readouterr().out) or ended in "".join(printed), 30, f"'{ended}'")

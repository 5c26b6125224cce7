"""A streaming job's run as its report tells it (``spark/support``): every batch's rows and the source
offsets from its first batch's start to its last batch's end, and the files it added to a sink."""

from __future__ import annotations

import argparse
import json

from spark.support import queries, tables
from spark.support.arguments import CATCH_UP


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

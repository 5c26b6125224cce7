"""Provenance over a log of runs built with the project's own event builders: from a version of
`supplier_stats` back through the ingestion runs that wrote its day to the offsets of `orders` and
the archive files that hold them."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from openlineage.client.event_v2 import RunState

from lineage_assets.datasets import (
    ARCHIVE,
    LAKEHOUSE_ORDERS,
    LAKEHOUSE_SUPPLIERS,
    ORDERS,
    SUPPLIER_REVENUE,
    SUPPLIER_STATS,
    SUPPLIERS,
)
from lineage_assets.lineage import events, run_facts
from lineage_assets.lineage.provenance import ProvenanceError, provenance, reached
from lineage_assets.lineage.run_facts import (
    NO_FACTS,
    DagsterRun,
    DatasetVersion,
    OffsetRange,
    RunFacts,
    SourceRead,
    WrittenFile,
    table_read,
)
from lineage_assets.lineage.run_records import runs_of
from lineage_assets.lineage.transport import event_line
from lineage_assets.settings import Settings
from lineage_assets.settings_environment import settings_from_env
from tests.openlineage_schemas import validate_event

SETTINGS = Settings()
T0 = dt.datetime(2026, 11, 21, 12, 0, tzinfo=dt.UTC)


def run(n: int, dataset, facts: RunFacts) -> list[dict]:
    dagster_run = DagsterRun(run_id=f"00000000-0000-4000-8000-00000000000{n}", job_name="j", started_at=T0)
    at = T0 + dt.timedelta(minutes=n)
    return [
        json.loads(event_line(events.asset_event(state, dataset, dagster_run, SETTINGS, facts, event_time=at)))
        for state, facts in ((RunState.START, NO_FACTS), (RunState.COMPLETE, facts))
    ]


def orders_read(start: int, end: int) -> SourceRead:
    return run_facts.orders_read(SETTINGS, (), (), {"orders": {"0": start}}, {"orders": {"0": end}})


LOG = [
    *run(1, ORDERS, RunFacts(offsets=(OffsetRange(0, 0, 10),))),
    *run(
        2,
        ARCHIVE,
        RunFacts(reads=(orders_read(0, 10),), files=(WrittenFile("a/1.json", 10), WrittenFile("a/2.json", 9))),
    ),
    *run(
        3,
        LAKEHOUSE_ORDERS,
        RunFacts(
            reads=(orders_read(0, 10),),
            version=DatasetVersion("100"),  # it began the table
            partitions=("2026-11-20", "2026-11-21"),
        ),
    ),
    *run(4, ORDERS, RunFacts(offsets=(OffsetRange(0, 10, 15),))),
    *run(
        5,
        LAKEHOUSE_ORDERS,
        RunFacts(reads=(orders_read(10, 15),), version=DatasetVersion("101", parent="100"), partitions=("2026-11-21",)),
    ),
    *run(
        6,
        SUPPLIER_STATS,
        RunFacts(
            reads=(table_read(LAKEHOUSE_ORDERS, 101),),
            version=DatasetVersion("200"),
            partitions=("2026-11-20",),
        ),
    ),
    *run(
        7,
        SUPPLIER_STATS,
        RunFacts(
            reads=(table_read(LAKEHOUSE_ORDERS, 101),),
            version=DatasetVersion("201", parent="200"),
            partitions=("2026-11-21",),
        ),
    ),
]


def chain(answer) -> list[tuple[str, str | None]]:
    """(job, version written) of every run in the answer, depth first."""
    found = []

    def walk(step):
        found.append((step["job"].split("/")[1], step["wrote"].get("version") or str(step["wrote"].get("offsets"))))
        for read in step["read"]:
            for made in read["made_by"]:
                walk(made)

    for step in answer.as_dict()["made_by"]:
        walk(step)
    return found


def test_a_day_is_traced_to_the_ingestion_runs_that_wrote_it_and_the_offsets_they_read():
    answer = provenance(runs_of(LOG), SUPPLIER_STATS, SETTINGS, partition="2026-11-20")
    assert chain(answer) == [
        (SUPPLIER_STATS.job.lineage_name, "200"),
        (LAKEHOUSE_ORDERS.job.lineage_name, "100"),  # the run of 2026-11-21 alone is not in it
        (ORDERS.job.lineage_name, "[{'partition': 0, 'start': 0, 'end': 10}]"),
    ]
    (ingestion,) = answer.as_dict()["made_by"][0]["read"][0]["made_by"]
    assert ingestion["read"][0]["offsets"] == [{"partition": 0, "start": 0, "end": 10}]
    assert ingestion["archived_by"] == [
        {"run": ingestion["archived_by"][0]["run"], "dataset": ARCHIVE.key, "files": ["a/1.json", "a/2.json"]}
    ]
    assert "partition 0 offsets 0..9" in answer.tree() and "a/2.json" in answer.tree()


def test_a_day_two_ingestion_runs_wrote_has_both_and_a_version_or_a_time_picks_the_run():
    assert [job for job, _ in chain(provenance(runs_of(LOG), SUPPLIER_STATS, SETTINGS, partition="2026-11-21"))].count(
        LAKEHOUSE_ORDERS.job.lineage_name
    ) == 2
    assert chain(provenance(runs_of(LOG), SUPPLIER_STATS, SETTINGS, version="200"))[0][1] == "200"
    assert (
        chain(provenance(runs_of(LOG), SUPPLIER_STATS, SETTINGS, at=T0 + dt.timedelta(minutes=6, seconds=30)))[0][1]
        == "200"
    )
    assert chain(provenance(runs_of(LOG), SUPPLIER_STATS, SETTINGS))[0][1] == "201"  # the latest


def test_a_days_figure_joined_with_a_dimension_is_traced_to_both_topics_and_reads_are_listed_in_one_order():
    """A dimension's table is written by no day: all of its writers up to the snapshot read made the
    day's figure, whichever day is asked for."""
    suppliers_topic = {SETTINGS.suppliers_topic: {"0": 0}}, {SETTINGS.suppliers_topic: {"0": 8}}
    dimension = [
        *run(8, SUPPLIERS, RunFacts(offsets=(OffsetRange(0, 0, 8),))),
        *run(
            9,
            LAKEHOUSE_SUPPLIERS,
            RunFacts(
                reads=(run_facts.topic_read(SUPPLIERS, SETTINGS.suppliers_topic, (), (), *suppliers_topic),),
                version=DatasetVersion("300"),
            ),
        ),
    ]
    reads = (table_read(SUPPLIER_STATS, 200), table_read(LAKEHOUSE_SUPPLIERS, 300))
    revenue = [
        *run(10, SUPPLIER_REVENUE, RunFacts(reads=reads, version=DatasetVersion("400"), partitions=("2026-11-20",)))
    ]
    backwards = [
        *run(
            10, SUPPLIER_REVENUE, RunFacts(reads=reads[::-1], version=DatasetVersion("400"), partitions=("2026-11-20",))
        )
    ]
    answer = provenance(runs_of([*LOG, *dimension, *revenue]), SUPPLIER_REVENUE, SETTINGS, partition="2026-11-20")
    assert chain(answer) == [
        (SUPPLIER_REVENUE.job.lineage_name, "400"),
        (SUPPLIER_STATS.job.lineage_name, "200"),
        (LAKEHOUSE_ORDERS.job.lineage_name, "100"),
        (ORDERS.job.lineage_name, "[{'partition': 0, 'start': 0, 'end': 10}]"),
        (LAKEHOUSE_SUPPLIERS.job.lineage_name, "300"),
        (SUPPLIERS.job.lineage_name, "[{'partition': 0, 'start': 0, 'end': 8}]"),
    ]
    other_order = provenance(
        runs_of([*LOG, *dimension, *backwards]), SUPPLIER_REVENUE, SETTINGS, partition="2026-11-20"
    )
    assert other_order.as_dict() == answer.as_dict()  # as the log and Marquez, which list inputs otherwise


def test_a_version_no_run_wrote_names_those_there_are():
    with pytest.raises(ProvenanceError, match=r"partition 2026-11-19; partitions written: 2026-11-20, 2026-11-21"):
        provenance(runs_of(LOG), SUPPLIER_STATS, SETTINGS, partition="2026-11-19")


def run_id(n: int, dataset) -> str:
    dagster_run = DagsterRun(run_id=f"00000000-0000-4000-8000-00000000000{n}", job_name="j", started_at=T0)
    return dagster_run.asset_run_id(dataset)


def test_an_ingestion_run_reaches_the_days_it_wrote_and_no_other():
    first = reached(runs_of(LOG), run_id(3, LAKEHOUSE_ORDERS), SETTINGS)
    assert first.partitions() == {SUPPLIER_STATS.key: ["2026-11-20", "2026-11-21"]}
    second = reached(runs_of(LOG), run_id(5, LAKEHOUSE_ORDERS), SETTINGS)
    assert [run.run_id for run, _ in second.downstream] == [run_id(7, SUPPLIER_STATS)]
    assert second.partitions() == {SUPPLIER_STATS.key: ["2026-11-21"]}


def test_a_producer_run_reaches_the_archive_the_table_and_the_days_through_it():
    answer = reached(runs_of(LOG), run_id(4, ORDERS), SETTINGS)  # offsets 10..14 only
    assert [run.run_id for run, _ in answer.downstream] == [run_id(5, LAKEHOUSE_ORDERS), run_id(7, SUPPLIER_STATS)]
    everything = reached(runs_of(LOG), run_id(1, ORDERS), SETTINGS)
    assert {run.run_id for run, _ in everything.downstream} == {
        run_id(2, ARCHIVE),
        run_id(3, LAKEHOUSE_ORDERS),
        run_id(6, SUPPLIER_STATS),
        run_id(7, SUPPLIER_STATS),
    }
    assert "nothing downstream" in reached(runs_of(LOG), run_id(7, SUPPLIER_STATS), SETTINGS).tree()


def repaired(parent: str | None) -> list[dict]:
    """LOG, then the table repaired after the run of 101 (rolled back to ``parent``, or rebuilt when
    None) and ingested again as 102, and 2026-11-21 computed from it."""
    return [
        *LOG,
        *run(
            8,
            LAKEHOUSE_ORDERS,
            RunFacts(
                reads=(orders_read(0, 15) if parent is None else orders_read(10, 15),),
                version=DatasetVersion("102", parent=parent),
                partitions=("2026-11-20", "2026-11-21") if parent is None else ("2026-11-21",),
            ),
        ),
        *run(
            9,
            SUPPLIER_STATS,
            RunFacts(
                reads=(table_read(LAKEHOUSE_ORDERS, 102),),
                version=DatasetVersion("202", parent="201"),
                partitions=("2026-11-21",),
            ),
        ),
    ]


@pytest.mark.parametrize("parent", ["100", None], ids=["rolled-back", "rebuilt"])
def test_after_a_table_is_repaired_the_bad_run_reaches_nothing_computed_from_the_repair(parent):
    runs = runs_of(repaired(parent))
    bad = reached(runs, run_id(5, LAKEHOUSE_ORDERS), SETTINGS)
    assert [run.run_id for run, _ in bad.downstream] == [run_id(7, SUPPLIER_STATS)]  # not the run of 9
    day = provenance(runs, SUPPLIER_STATS, SETTINGS, partition="2026-11-21").as_dict()["made_by"][0]
    writers = [made["run"] for made in day["read"][0]["made_by"]]
    assert run_id(5, LAKEHOUSE_ORDERS) not in writers and writers[-1] == run_id(8, LAKEHOUSE_ORDERS)
    assert (run_id(3, LAKEHOUSE_ORDERS) in writers) == (parent == "100")  # a rebuilt table holds the repair alone


def test_runs_that_did_not_record_their_parent_snapshot_are_taken_to_build_on_the_one_before():
    def unrecorded(event: dict) -> dict:
        for output in event.get("outputs") or []:
            output.get("outputFacets", {}).pop("icebergSnapshot", None)
        return event

    runs = runs_of([unrecorded(event) for event in repaired("100")])
    assert run_id(9, SUPPLIER_STATS) in [
        run.run_id for run, _ in reached(runs, run_id(5, LAKEHOUSE_ORDERS), SETTINGS).downstream
    ]


def compacted(recorded: bool) -> list[dict]:
    """LOG, with the upkeep's compactions in it: 150 rewrites 101's files (a ``replace`` no run reports),
    102 is ingested on 150, 151 rewrites 102's, and 2026-11-21 is computed from 151. The runs record
    whose rows 150 and 151 hold, unless not ``recorded``."""
    return [
        *LOG,
        *run(
            8,
            LAKEHOUSE_ORDERS,
            RunFacts(
                reads=(orders_read(15, 20),),
                version=DatasetVersion("102", parent="150", parent_data="101" if recorded else None),
                partitions=("2026-11-21",),
            ),
        ),
        *run(
            9,
            SUPPLIER_STATS,
            RunFacts(
                reads=(table_read(LAKEHOUSE_ORDERS, 151, data_snapshot_id=102 if recorded else None),),
                version=DatasetVersion("202", parent="201"),
                partitions=("2026-11-21",),
            ),
        ),
    ]


def test_a_day_read_from_a_compacted_snapshot_is_traced_through_the_compactions_to_every_ingestion_run():
    log = compacted(recorded=True)
    assert all(validate_event(event) == [] for event in log)  # the facets' new fields
    (read,) = log[-1]["inputs"]  # the version of its rows, which a run wrote; the snapshot itself beside it
    assert (read["facets"]["version"]["datasetVersion"], read["inputFacets"]["icebergSnapshot"]["snapshotId"]) == (
        "102",
        151,
    )
    answer = provenance(runs_of(compacted(recorded=True)), SUPPLIER_STATS, SETTINGS, partition="2026-11-21")
    (stats,) = answer.as_dict()["made_by"]
    (table,) = stats["read"]
    assert (table["version"], table["data_version"]) == ("151", "102")
    assert [made["run"] for made in table["made_by"]] == [
        run_id(3, LAKEHOUSE_ORDERS),
        run_id(5, LAKEHOUSE_ORDERS),
        run_id(8, LAKEHOUSE_ORDERS),
    ]
    assert "at snapshot 151 (a compaction: the rows of snapshot 102)" in answer.tree()
    reach = reached(runs_of(compacted(recorded=True)), run_id(3, LAKEHOUSE_ORDERS), SETTINGS)
    assert run_id(9, SUPPLIER_STATS) in [run.run_id for run, _ in reach.downstream]
    # Without whose rows the compactions hold, the chain would stop at the snapshots no run wrote.
    unrecorded = provenance(runs_of(compacted(recorded=False)), SUPPLIER_STATS, SETTINGS, partition="2026-11-21")
    assert unrecorded.as_dict()["made_by"][0]["read"][0]["made_by"] == []


def test_a_deployments_files_are_all_those_its_events_named():
    """Each RUNNING event of an archive deployment names the files added since the one before: the
    records a read of `orders` consumed are in all of them."""
    deployment = DagsterRun(run_id="00000000-0000-4000-8000-0000000000a1", job_name="j", started_at=T0)

    def running(minute: int, end: int, path: str) -> dict:
        facts = RunFacts(reads=(orders_read(0, end),), files=(WrittenFile(path, 1),))
        event = events.asset_event(
            RunState.RUNNING,
            ARCHIVE,
            None,
            SETTINGS,
            facts,
            run_id=deployment.asset_run_id(ARCHIVE),
            event_time=T0 + dt.timedelta(minutes=minute),
            running_interval=30,
        )
        return json.loads(event_line(event))

    log = [*LOG[:2], *LOG[4:], running(20, 8, "b/1.json"), running(21, 10, "b/2.json")]  # the archive's run replaced
    answer = provenance(runs_of(log), SUPPLIER_STATS, SETTINGS, partition="2026-11-20").as_dict()
    (ingestion,) = answer["made_by"][0]["read"][0]["made_by"]
    assert [archived["files"] for archived in ingestion["archived_by"]] == [["b/1.json", "b/2.json"]]


def test_the_command_line_answers_from_the_log_and_names_a_version_no_run_wrote(tmp_path, monkeypatch, capsys):
    from lineage_assets.cli import main
    from lineage_assets.lineage.emitter import LineageEmitter

    monkeypatch.setenv("LINEAGE_ASSETS_STATE_DIR", str(tmp_path))
    log = LineageEmitter(settings_from_env().lineage_dir, None)
    for event in LOG:
        log.emit(json.dumps(event))
    assert main(["lineage", "provenance", "lakehouse/supplier_stats", "--partition", "2026-11-20", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["made_by"][0]["wrote"]["version"] == "200"
    assert main(["lineage", "reached", run_id(5, LAKEHOUSE_ORDERS)]) == 0
    assert "partitions 2026-11-21" in capsys.readouterr().out
    assert main(["lineage", "provenance", "lakehouse/supplier_stats", "--version", "999"]) == 2
    assert "no run wrote lakehouse/supplier_stats version 999" in capsys.readouterr().err
    assert main(["lineage", "reached", "not-a-run"]) == 2
    assert "no run 'not-a-run'" in capsys.readouterr().err

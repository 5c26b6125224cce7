"""The dead-letter replay's pure parts: reasons, source times, and the offsets its commits record."""

from __future__ import annotations

from lineage_assets.dead_letters import (
    commit_metadata,
    reason_prefix,
    recorded_end_offsets,
    replay_position,
    source_time_ms,
)


def test_a_reason_is_counted_by_its_kind():
    assert (
        reason_prefix("schema_incompatible: orders-value version 2 (id 7): field supplier is missing")
        == "schema_incompatible"
    )
    assert reason_prefix("price 'twelve' is not a DECIMAL(10,2)") == "price 'twelve' is not a DECIMAL(10,2)"


def test_source_times_are_read_as_spark_writes_them():
    assert source_time_ms("2026-11-20T23:56:01.000Z") == 1_795_218_961_000
    assert source_time_ms("2026-11-20T23:56:01.123Z") == 1_795_218_961_123
    assert source_time_ms("2026-11-21T00:56:01.123+01:00") == 1_795_218_961_123
    assert source_time_ms("2026-11-20T23:56:01.123") == 1_795_218_961_123  # no offset: UTC


def test_the_replay_header_names_the_dead_letter():
    assert replay_position("orders-dlq", 0, 41) == "orders-dlq/0/41"


def test_recorded_end_offsets_come_back_from_the_commit_metadata():
    metadata = commit_metadata("orders", {1: 12, 0: 30})
    assert recorded_end_offsets([metadata], "orders") == {0: 30, 1: 12}
    # A commit that failed for some partitions leaves them an older round's metadata: the lowest offset wins.
    assert recorded_end_offsets([metadata, commit_metadata("orders", {0: 25, 1: 14}), None, ""], "orders") == {
        0: 25,
        1: 12,
    }


def test_metadata_of_another_source_topic_records_nothing():
    assert recorded_end_offsets([commit_metadata("orders-old", {0: 30})], "orders") == {}
    assert recorded_end_offsets([None], "orders") == {}

"""Dead-letter replay on the real stack: a version the pipeline cannot read stops it; once taught,
each dead letter is in the source topic exactly once, also after a run that died before committing."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import json
import uuid

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from lineage_assets import cli, dead_letters
from lineage_assets.connections import registry_client_conf
from lineage_assets.datasets import ORDERS_AVRO_SCHEMA, with_aliases
from lineage_assets.dead_letters import GROUP, REPLAY_HEADER, ReplayError, replay, source_time_ms
from lineage_assets.demo import DRIFTED_ORDERS_SCHEMA
from lineage_assets.settings import Settings
from lineage_assets.settings_environment import as_environment
from lineage_assets.source_schemas import registered_versions, value_subject
from tests.unit.conftest import confluent_avro

V1 = ORDERS_AVRO_SCHEMA
V2 = DRIFTED_ORDERS_SCHEMA  # a producer renamed supplier
TAUGHT = with_aliases(V1, supplier=("vendor",))  # the pipeline taught version 2
BAD_PRICE = "price 'twelve' is not a DECIMAL(10,2)"
SOURCE_TIME = dt.datetime(2026, 11, 20, 23, 56, tzinfo=dt.UTC)


def spark_json_time(moment: dt.datetime) -> str:
    """A time as Spark's to_json writes it in a UTC session: 2026-11-20T23:56:01.001Z."""
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclasses.dataclass
class Letters:
    """Own topics and subject, v1 and v2 registered, and the dead letters written so far."""

    settings: Settings
    ids: dict[int, int]  # version -> schema id
    written: list[dict] = dataclasses.field(default_factory=list)  # key, value, time, reason, position

    def write(self, *kinds: str) -> list[dict]:
        """Dead letters as the ingestion writes them: "v2" a record of version 2, "bad" a bad price."""
        reason_v2 = registered_versions(
            registry_client_conf(self.settings), value_subject(self.settings.orders_topic), json.dumps(V1)
        )[self.ids[2]].dead_letter_reason
        producer = Producer({"bootstrap.servers": self.settings.kafka_servers})
        letters = []
        for kind in kinds:
            n = len(self.written) + len(letters)
            order = {"order_id": f"order-{n}", "bid_time": 1_795_000_000_000 + n, "price": "12.50", "item": "lamp"}
            if kind == "v2":
                value, version, reason = confluent_avro(V2, {**order, "vendor": "acme"}, self.ids[2]), 2, reason_v2
            else:
                value, version, reason = (
                    confluent_avro(V1, {**order, "price": "twelve", "supplier": "acme"}, self.ids[1]),
                    1,
                    BAD_PRICE,
                )
            letter = {
                "key": order["order_id"].encode(),
                "value": value,
                "reason": reason,
                "time": spark_json_time(SOURCE_TIME + dt.timedelta(seconds=n, milliseconds=n)),
                "offset": 100 + n,
            }
            producer.produce(
                self.settings.dead_letter_topic,
                key=letter["key"],
                value=json.dumps(
                    {
                        "reason": reason,
                        "job": "iceberg-ingestion",
                        "topic": self.settings.orders_topic,
                        "partition": 0,
                        "offset": letter["offset"],
                        "source_timestamp": letter["time"],
                        "value_base64": base64.b64encode(value).decode(),
                        "schema_id": self.ids[version],
                        "schema_version": version,
                    }
                ),
            )
            letters.append(letter)
        assert producer.flush(30) == 0
        dlq_end = high_watermark(self.settings, self.settings.dead_letter_topic)
        for i, letter in enumerate(letters):
            letter["position"] = f"{self.settings.dead_letter_topic}/0/{dlq_end - len(letters) + i}"
        self.written += letters
        return letters

    def replay_of(self, letter: dict) -> None:
        """What a replay run produces for ``letter`` before it commits."""
        producer = Producer({"bootstrap.servers": self.settings.kafka_servers})
        producer.produce(
            self.settings.orders_topic,
            key=letter["key"],
            value=letter["value"],
            partition=0,
            timestamp=source_time_ms(letter["time"]),
            headers=[(REPLAY_HEADER, letter["position"])],
        )
        assert producer.flush(30) == 0


def high_watermark(settings: Settings, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": settings.kafka_servers, "group.id": "replay-test-reader"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        consumer.close()


def source_records(settings: Settings) -> list:
    """Every record of the source topic, read back from the start."""
    end = high_watermark(settings, settings.orders_topic)
    consumer = Consumer(
        {"bootstrap.servers": settings.kafka_servers, "group.id": "replay-test-reader", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(settings.orders_topic, 0, 0)])
    records = []
    try:
        while len(records) < end:
            records += [m for m in consumer.consume(100, timeout=1) if not m.error()]
    finally:
        consumer.close()
    return records


def assert_replayed_once(settings: Settings, letters: list[dict]) -> None:
    """Each of ``letters`` is in the source topic once, as the original record was, with the header."""
    records = source_records(settings)
    assert len(records) == len(letters)
    by_position = {dict(m.headers())[REPLAY_HEADER].decode(): m for m in records}
    assert sorted(by_position) == sorted(letter["position"] for letter in letters)
    for letter in letters:
        record = by_position[letter["position"]]
        assert record.key() == letter["key"]
        assert record.value() == letter["value"]
        assert record.timestamp() == (TIMESTAMP_CREATE_TIME, source_time_ms(letter["time"]))


@pytest.fixture
def letters(stack, settings) -> Letters:
    suffix = uuid.uuid4().hex[:8]
    mine = dataclasses.replace(settings, orders_topic=f"replay-src-{suffix}", dead_letter_topic=f"replay-dlq-{suffix}")
    admin = AdminClient({"bootstrap.servers": mine.kafka_servers})
    for future in admin.create_topics(
        [NewTopic(mine.orders_topic, 1, 1), NewTopic(mine.dead_letter_topic, 1, 1)]
    ).values():
        future.result(timeout=30)
    registry = SchemaRegistryClient({"url": mine.schema_registry_url})
    subject = value_subject(mine.orders_topic)
    ids = {
        version: registry.register_schema(subject, Schema(json.dumps(schema), "AVRO"))
        for version, schema in ((1, V1), (2, V2))
    }
    return Letters(mine, ids)


def test_a_version_the_pipeline_cannot_read_stops_the_replay(letters):
    letters.write("bad", "v2", "v2")

    report = replay(letters.settings, json.dumps(V1), progress=lambda line: None)
    assert (report.replayed, report.already_replayed, report.versions) == (0, 0, {})
    assert report.passed_over == {BAD_PRICE: 1}
    version_2 = f"{value_subject(letters.settings.orders_topic)} version 2 (id {letters.ids[2]})"
    assert report.stopped_at == (
        f"{letters.settings.dead_letter_topic} partition 0 offset 1: {version_2} "
        f"cannot be read by the pipeline: field supplier is missing (removed or renamed)"
    )
    assert report.stopped_version == version_2

    again = replay(letters.settings, json.dumps(V1), progress=lambda line: None)
    assert (again.replayed, again.passed_over, again.stopped_at) == (0, {}, report.stopped_at)
    assert source_records(letters.settings) == []


def test_the_command_says_where_it_stopped_and_what_to_teach(letters, monkeypatch, capsys):
    # The catalog's reader schema reads version 1 only (no alias for vendor).
    letters.write("v2")
    for variable, value in as_environment(letters.settings).items():
        monkeypatch.setenv(variable, value)

    assert cli.main(["dlq", "replay"]) == 1
    out = capsys.readouterr().out
    assert f"stopped at {letters.settings.dead_letter_topic} partition 0 offset 0" in out
    assert "field supplier is missing" in out
    assert f"{value_subject(letters.settings.orders_topic)} version 2 (id {letters.ids[2]}): teach the pipeline" in out
    assert "lineage_assets/datasets.py" in out

    assert cli.main(["dlq", "replay", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["replayed"] == 0 and "version 2" in report["stopped_at"]


def test_a_taught_version_replays_each_dead_letter_exactly_once(letters):
    v2 = [letter for letter in letters.write("bad", "v2", "v2", "bad", "v2") if letter["reason"] != BAD_PRICE]

    report = replay(letters.settings, json.dumps(TAUGHT), progress=lambda line: None)
    assert (report.replayed, report.already_replayed, report.stopped_at) == (3, 0, None)
    assert report.versions == {2: 3}
    assert report.passed_over == {BAD_PRICE: 2}
    assert_replayed_once(letters.settings, v2)
    # The commit says how far the dead letters are done and where the source topic ended then.
    consumer = Consumer({"bootstrap.servers": letters.settings.kafka_servers, "group.id": GROUP})
    [committed] = consumer.committed([TopicPartition(letters.settings.dead_letter_topic, 0)], timeout=10)
    consumer.close()
    assert committed.offset == 5
    assert json.loads(committed.metadata) == {"topic": letters.settings.orders_topic, "end_offsets": {"0": 3}}

    again = replay(letters.settings, json.dumps(TAUGHT), progress=lambda line: None)
    assert (again.replayed, again.already_replayed, again.passed_over, again.stopped_at) == (0, 0, {}, None)
    assert_replayed_once(letters.settings, v2)


def test_replays_of_a_run_that_died_before_committing_are_not_repeated(letters):
    first, _, second = letters.write("v2", "bad", "v2")
    # A run replayed the first dead letter, then died before its first commit: no metadata, the
    # next run looks through the whole source topic.
    letters.replay_of(first)
    report = replay(letters.settings, json.dumps(TAUGHT), progress=lambda line: None)
    assert (report.replayed, report.already_replayed, report.passed_over) == (1, 1, {BAD_PRICE: 1})
    assert_replayed_once(letters.settings, [first, second])

    # After that commit, another run replays one more and dies: found past the recorded end offsets.
    third, fourth = letters.write("v2", "v2")
    letters.replay_of(third)
    report = replay(letters.settings, json.dumps(TAUGHT), progress=lambda line: None)
    assert (report.replayed, report.already_replayed, report.stopped_at) == (1, 1, None)
    assert_replayed_once(letters.settings, [first, second, third, fourth])


def test_an_unreachable_registry_is_named_with_its_setting(letters):
    letters.write("v2")
    unreachable = dataclasses.replace(letters.settings, registry_url="http://127.0.0.1:1/apis/ccompat/v7")
    with pytest.raises(ReplayError, match=r"http://127\.0\.0\.1:1/apis/ccompat/v7.*LINEAGE_ASSETS_REGISTRY_URL"):
        replay(unreachable, json.dumps(TAUGHT), progress=lambda line: None)


def test_an_unreachable_kafka_is_named_with_its_setting(settings, monkeypatch):
    monkeypatch.setattr(dead_letters, "REQUEST_TIMEOUT_S", 1.0)  # the wait before giving up, not what is said
    unreachable = dataclasses.replace(settings, kafka_bootstrap="127.0.0.1:1")
    with pytest.raises(ReplayError, match=r"^Kafka at 127\.0\.0\.1:1 \(LINEAGE_ASSETS_KAFKA_BOOTSTRAP\): "):
        replay(unreachable, json.dumps(TAUGHT), progress=lambda line: None)

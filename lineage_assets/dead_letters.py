"""Replay dead letters into the source topic, each exactly once, once the pipeline can read them.

The ingestion sends a record whose writer schema version it cannot read to the dead-letter topic
(reason ``schema_incompatible: …``). Once the pipeline is taught the version (``datasets.py``),
``replay`` re-publishes those records to the source topic so the ordinary ingestion reads them.

Exactly once without Kafka transactions: transaction markers would take offsets in the source
topic, and the reconciliation checks count records by offsets. Instead the dead-letter offsets are
committed only after every replay of them is acknowledged, and the commit's metadata records the
source topic's end offsets at that moment. A run that dies between producing and committing leaves
replays past those recorded offsets, each carrying ``REPLAY_HEADER``: the next run scans from there,
finds them, and does not replay them again.

Replays must not run concurrently (two runs would both replay what neither has committed).
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from lineage_assets.connections import kafka_conf, registry_client_conf
from lineage_assets.settings import Settings
from lineage_assets.source_schemas import (
    SCHEMA_INCOMPATIBLE,
    RegistryError,
    WriterVersion,
    registered_versions,
    value_subject,
)

TEACH_THEN_REPLAY = (
    "teach the pipeline the version in lineage_assets/datasets.py (ORDERS_READER_SCHEMA; a renamed "
    'field: with_aliases(ORDERS_AVRO_SCHEMA, field=("new name",))), then `lineage-assets dlq replay`'
)
REPLAY_HEADER = "lineage-assets.replay-of"  # value: "{dlq topic}/{partition}/{offset}" of the dead letter replayed
GROUP = "lineage-assets-dlq-replay"  # its committed offsets are how far the dead-letter topic was replayed
BATCH = 500  # dead letters per produce-flush-commit round: bounds what a crash leaves for the next run to find
REQUEST_TIMEOUT_S = 10.0
STALL_S = 30.0  # records known to exist that do not arrive for this long: the broker is gone, not slow
# Retriable in Kafka's protocol, yet librdkafka's committed() and commit() raise them as they come
# (and call them not retriable): a fresh broker answers them while it creates its offsets topic.
_COORDINATOR_NOT_READY = {
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
}

# librdkafka logs every failed connection attempt; a failed replay says it once, as a ReplayError.
# Applications that configure logging still see these lines (they propagate).
_librdkafka_log = logging.getLogger(f"{__name__}.librdkafka")
_librdkafka_log.addHandler(logging.NullHandler())


class ReplayError(RuntimeError):
    """Kafka or the schema registry failed; one line naming the setting and the address."""


@dataclass(frozen=True)
class ReplayReport:
    """What one replay did. Counts are of this run; what it replayed is committed."""

    replayed: int
    already_replayed: int  # found in the source topic, replayed by an earlier run that died before committing
    passed_over: dict[str, int]  # reason prefix -> dead letters of other reasons, left in the dead-letter topic
    stopped_at: str | None  # the dead letter it could not replay and why; None = it reached the end
    stopped_version: str | None  # the label of the unreadable version it stopped at (teach the pipeline it)
    versions: dict[int, int]  # writer schema version -> dead letters replayed


def replay_position(dlq_topic: str, partition: int, offset: int) -> str:
    """The value of ``REPLAY_HEADER``: which dead letter a replayed record is."""
    return f"{dlq_topic}/{partition}/{offset}"


def _position(message: Message) -> tuple[int, int]:
    """(partition, offset) of a consumed record: only an error event, raised before this, has none."""
    partition, offset = message.partition(), message.offset()
    if partition is None or offset is None:
        raise ReplayError(f"a message of {message.topic()} has no partition or offset: {message.error()}")
    return partition, offset


def _header_texts(message: Message, name: str) -> list[str]:
    """The values of a consumed record's headers named ``name``, as text (a header without a value has none)."""
    headers = message.headers() or []
    # A consumer gives (name, bytes) pairs; the client's type also allows a producer's dict and str values.
    pairs = headers.items() if isinstance(headers, dict) else headers
    return [
        value if isinstance(value, str) else value.decode() for key, value in pairs if key == name and value is not None
    ]


def reason_prefix(reason: str) -> str:
    """A reason's kind: the part before the first ':' (``schema_incompatible``), else the whole reason."""
    return reason.split(":", 1)[0]


def source_time_ms(text: str) -> int:
    """Milliseconds since the epoch of a dead letter's ``source_timestamp`` (Spark's JSON text, e.g.
    ``2026-11-20T23:56:01.000Z``); one without an offset is UTC, the project's session zone."""
    moment = dt.datetime.fromisoformat(text)
    moment = moment.replace(tzinfo=moment.tzinfo or dt.UTC)
    return (moment - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(milliseconds=1)


def commit_metadata(source_topic: str, end_offsets: dict[int, int]) -> str:
    """Commit metadata: the source topic's end offsets once everything replayed so far is acknowledged."""
    return json.dumps(
        {"topic": source_topic, "end_offsets": {str(p): o for p, o in sorted(end_offsets.items())}},
        separators=(",", ":"),
    )


def recorded_end_offsets(metadata: list[str | None], source_topic: str) -> dict[int, int]:
    """Source partition -> where replays of a run that died after the last commit can start.

    Every round commits each dead-letter partition with the same metadata, but a commit that failed
    for some partitions leaves them an older round's: the lowest offset per source partition wins.
    Metadata of another source topic (the setting changed) or none: nothing recorded, scan from the
    beginning."""
    recorded: dict[int, int] = {}
    for text in metadata:
        if not text:
            continue
        record = json.loads(text)
        if record.get("topic") != source_topic:
            continue
        for partition, offset in record["end_offsets"].items():
            recorded[int(partition)] = min(offset, recorded.get(int(partition), offset))
    return recorded


def replay(
    settings: Settings, reader_schema: str, reason: str = SCHEMA_INCOMPATIBLE, progress: Callable[[str], None] = print
) -> ReplayReport:
    """Replay the dead letters of ``reason`` from ``settings.dead_letter_topic`` to ``settings.orders_topic``.

    Reads from the group's committed offsets to the end offsets known at start, so it ends. A dead
    letter is replayed when its writer version is readable as ``reader_schema`` (the catalog's
    reader schema, JSON); it stops at the first one whose version is not (or not registered), so
    nothing after it is skipped. Dead letters of other reasons are passed over and stay where they are."""
    kafka = {**kafka_conf(settings), "logger": _librdkafka_log}
    consumer = Consumer({**kafka, "group.id": GROUP, "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    producer = Producer({**kafka, "enable.idempotence": True, "acks": "all"})
    try:
        return _Replay(settings, reader_schema, reason, progress, consumer, producer).run()
    except KafkaException as error:
        raise ReplayError(
            f"Kafka at {settings.kafka_servers} (LINEAGE_ASSETS_KAFKA_BOOTSTRAP): {error.args[0].str()}"
        ) from error
    finally:
        consumer.close()


def _until_coordinator(call: Callable[[], list[TopicPartition]]) -> list[TopicPartition]:
    """``call()``, asked again while the group's coordinator is not ready, for up to REQUEST_TIMEOUT_S."""
    deadline = time.monotonic() + REQUEST_TIMEOUT_S
    while True:
        try:
            return call()
        except KafkaException as error:
            if error.args[0].code() not in _COORDINATOR_NOT_READY or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _raise_failed(partitions: list[TopicPartition]) -> list[TopicPartition]:
    """The partitions of a committed() or synchronous commit() answer, raising the first partition's error."""
    failed = next((tp.error for tp in partitions if tp.error), None)
    if failed:
        raise KafkaException(failed)
    return partitions


class _Replay:
    """One run: its clients, its counts, and how far each dead-letter partition is done."""

    def __init__(
        self,
        settings: Settings,
        reader_schema: str,
        reason: str,
        progress: Callable[[str], None],
        consumer: Consumer,
        producer: Producer,
    ):
        self.settings, self.reader_schema, self.reason, self.progress = settings, reader_schema, reason, progress
        self.consumer, self.producer = consumer, producer
        self.dlq, self.source = settings.dead_letter_topic, settings.orders_topic
        self.done: dict[int, int] = {}  # dead-letter partition -> next offset to commit
        self.replayed = self.already_replayed = 0
        self.passed_over: Counter[str] = Counter()
        self.versions: Counter[int] = Counter()
        self.failures: list[KafkaError] = []
        self.stopped_version: str | None = None

    def run(self) -> ReplayReport:
        partitions = self._offsets(self.dlq)
        if not partitions:
            self.progress(f"dlq replay: topic {self.dlq} does not exist: nothing to replay")
            return self._report(None)
        committed = _until_coordinator(
            lambda: _raise_failed(
                self.consumer.committed([TopicPartition(self.dlq, p) for p in partitions], timeout=REQUEST_TIMEOUT_S)
            )
        )
        # A committed offset below the low watermark points at records retention removed.
        self.done = {tp.partition: max(tp.offset, partitions[tp.partition][0]) for tp in committed}
        ranges = {p: (self.done[p], high) for p, (_, high) in partitions.items() if self.done[p] < high}
        if not ranges:
            self.progress(f"dlq replay: nothing new in {self.dlq}")
            return self._report(None)
        self.progress(
            f"dlq replay: {sum(high - low for low, high in ranges.values())} dead letters to read in {self.dlq} "
            f"({', '.join(f'partition {p} offsets {low}-{high - 1}' for p, (low, high) in ranges.items())}); "
            f"replaying reason {self.reason} into {self.source}"
        )
        versions = self._versions()
        already = self._replays_after(recorded_end_offsets([tp.metadata for tp in committed], self.source))
        if already:
            self.progress(
                f"dlq replay: {len(already)} replays by an interrupted earlier run are in {self.source}: "
                f"not replayed again"
            )
        for batch in self._read(self.dlq, ranges):
            stopped_at = None
            for message in batch:
                stopped_at = self._handle(message, versions, already)
                if stopped_at:
                    break
                partition, offset = _position(message)
                self.done[partition] = offset + 1
            self._commit()
            if stopped_at:
                return self._report(stopped_at)
        return self._report(None)

    def _handle(self, message: Message, versions: dict[int, WriterVersion], already: set[str]) -> str | None:
        """Replay, count or pass over one dead letter; why replay must stop at it, if it must."""
        partition, offset = _position(message)
        position = replay_position(self.dlq, partition, offset)
        where = f"{self.dlq} partition {partition} offset {offset}"
        value = message.value()
        if value is None:
            return f"{where} is not a dead letter as the ingestion writes them (it has no value)"
        try:
            letter = json.loads(value)
            reason = letter["reason"]
            chosen = reason.startswith(self.reason)
        except (TypeError, ValueError, KeyError, AttributeError) as error:
            return f"{where} is not a dead letter as the ingestion writes them ({error!r})"
        if not chosen:
            self.passed_over[reason_prefix(reason)] += 1
            return None
        if position in already:
            self.already_replayed += 1
            return None
        if letter.get("topic") != self.source:
            return (
                f"{where} is a dead letter of topic {letter.get('topic')!r}, not {self.source!r} "
                f"(LINEAGE_ASSETS_ORDERS_TOPIC): replay it with that setting"
            )
        version = versions.get(letter.get("schema_id"))
        if version is None:
            return (
                f"{where}: its schema id {letter.get('schema_id')} is not a registered version of "
                f"{value_subject(self.source)} at {self.settings.schema_registry_url}"
            )
        if not version.readable:
            self.stopped_version = version.label
            return f"{where}: {version.label} cannot be read by the pipeline: {'; '.join(version.problems)}"
        try:
            # Strict base64, line breaks aside: Spark's base64() wrapped long values in 76-character lines
            # unless spark.sql.chunkBase64String.enabled is off (the project turns it off).
            record = base64.b64decode("".join(letter["value_base64"].split()), validate=True)
            timestamp = source_time_ms(letter["source_timestamp"])
            source_partition = int(letter["partition"])
        except (TypeError, ValueError, KeyError, binascii.Error) as error:
            return f"{where} is not a dead letter as the ingestion writes them ({error!r})"
        # Back to the record's own partition: the key keeps its partition whatever the partitioner.
        self.producer.produce(
            self.source,
            value=record,
            key=message.key(),
            partition=source_partition,
            timestamp=timestamp,
            headers=[(REPLAY_HEADER, position)],
            on_delivery=self._delivered,
        )
        self.replayed += 1
        self.versions[version.version] += 1
        return None

    def _delivered(self, error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            self.failures.append(error)

    def _commit(self) -> None:
        """Commit how far the dead letters are done, once every replay of them is acknowledged."""
        unsent = self.producer.flush(REQUEST_TIMEOUT_S * 3)
        if unsent or self.failures:
            why = self.failures[0].str() if self.failures else f"{unsent} replays not acknowledged in time"
            raise ReplayError(
                f"Kafka at {self.settings.kafka_servers} (LINEAGE_ASSETS_KAFKA_BOOTSTRAP): replaying into "
                f"{self.source}: {why}; nothing of this round is committed, the next run finds what arrived"
            )
        ends = {p: high for p, (_, high) in self._offsets(self.source).items()}
        metadata = commit_metadata(self.source, ends)
        offsets = [TopicPartition(self.dlq, p, offset, metadata=metadata) for p, offset in sorted(self.done.items())]
        _until_coordinator(lambda: _raise_failed(self.consumer.commit(offsets=offsets, asynchronous=False)))
        self.progress(
            f"dlq replay: committed {self.dlq} "
            f"{', '.join(f'partition {p} to offset {o}' for p, o in sorted(self.done.items()))}; "
            f"{self.replayed} replayed so far"
        )

    def _versions(self) -> dict[int, WriterVersion]:
        try:
            return registered_versions(
                registry_client_conf(self.settings), value_subject(self.source), self.reader_schema
            )
        except RegistryError as error:
            raise ReplayError(f"{error} (LINEAGE_ASSETS_REGISTRY_URL)") from error

    def _offsets(self, topic: str) -> dict[int, tuple[int, int]]:
        """Partition -> (low, high) watermark of ``topic``; empty when the topic does not exist."""
        metadata = self.consumer.list_topics(topic, timeout=REQUEST_TIMEOUT_S).topics[topic]
        if metadata.error is not None:
            if metadata.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return {}
            raise KafkaException(metadata.error)
        return {
            p: self.consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=REQUEST_TIMEOUT_S)
            for p in sorted(metadata.partitions)
        }

    def _replays_after(self, recorded: dict[int, int]) -> set[str]:
        """Positions of dead letters whose replays are in the source topic past the recorded offsets."""
        offsets = self._offsets(self.source)
        ranges = {p: (max(low, recorded.get(p, low)), high) for p, (low, high) in offsets.items()}
        ranges = {p: (start, end) for p, (start, end) in ranges.items() if start < end}
        self.progress(
            f"dlq replay: looking for replays of an interrupted run in {self.source} "
            f"({sum(end - start for start, end in ranges.values())} records)"
        )
        return {
            position
            for batch in self._read(self.source, ranges)
            for message in batch
            for position in _header_texts(message, REPLAY_HEADER)
        }

    def _read(self, topic: str, ranges: dict[int, tuple[int, int]]) -> Iterator[list[Message]]:
        """Batches of ``topic``'s records, each partition from its start to its end offset (exclusive)."""
        ends = {p: end for p, (start, end) in ranges.items() if start < end}
        self.consumer.assign([TopicPartition(topic, p, ranges[p][0]) for p in ends])
        last_arrival = time.monotonic()
        while ends:
            batch = []
            for message in self.consumer.consume(BATCH, timeout=0.25):  # short: the last batch is rarely full
                if message.error():
                    raise KafkaException(message.error())
                partition, offset = _position(message)
                end = ends.get(partition) if message.topic() == topic else None
                if end is None or offset >= end:
                    continue  # fetched for an earlier assignment, or written after the start (the next run's)
                batch.append(message)
                if offset + 1 >= end:
                    del ends[partition]
            if batch:
                yield batch
                last_arrival = time.monotonic()  # after the batch's replays: their flush is not a stall
            elif time.monotonic() - last_arrival > STALL_S:
                raise ReplayError(
                    f"Kafka at {self.settings.kafka_servers} (LINEAGE_ASSETS_KAFKA_BOOTSTRAP): "
                    f"no record of {topic} arrived for {STALL_S:.0f} s, partitions {sorted(ends)} "
                    f"unread to offsets {sorted(ends.values())}"
                )

    def _report(self, stopped_at: str | None) -> ReplayReport:
        return ReplayReport(
            replayed=self.replayed,
            already_replayed=self.already_replayed,
            passed_over=dict(self.passed_over),
            stopped_at=stopped_at,
            stopped_version=self.stopped_version,
            versions=dict(self.versions),
        )

"""The order generator: the reference's mock source, deterministic under a seed.

``generate_orders`` is pure: the same config gives the same records, so a test can compute the
expected archive, tables and window totals independently of the pipeline. ``produce_orders`` sends
them to Kafka with confluent-kafka's schema-registry Avro serializer (Confluent wire format).

Time is simulated: order ``i`` is "sent" at ``start + i * interval`` (its Kafka timestamp) and its
bid_time lies within the 5 seconds before that, as in the reference. Late records lag by
``late_seconds`` instead; bad records exercise the dead-letter path.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from lineage_assets.connections import kafka_conf, registry_client_conf
from lineage_assets.datasets import orders_avro_schema_json, suppliers_avro_schema_json
from lineage_assets.settings import Settings

SUPPLIERS = ("Alice", "Bob", "Carol", "Alex", "Joe", "James", "Jane", "Jack")
ITEMS = (
    "Mountain Bike",
    "Running Shoes",
    "Espresso Machine",
    "Desk Lamp",
    "Noise-Cancelling Headphones",
    "Backpack",
    "Water Bottle",
    "Yoga Mat",
    "Mechanical Keyboard",
    "Camping Tent",
    "Cast Iron Pan",
    "Smart Watch",
    "Board Game",
    "Sunglasses",
    "Bluetooth Speaker",
)
REGIONS = ("EMEA", "AMER", "APAC")
TIERS = ("gold", "silver", "bronze")
BAD_KINDS = ("not-avro", "missing-field", "price-out-of-range", "price-not-a-number")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GeneratorConfig:
    count: int = 100
    seed: int = 7
    start: dt.datetime | None = None  # simulated send time of the first order; default: now - count * interval
    interval_seconds: float = 1.0
    late_fraction: float = 0.0
    late_seconds: float = 30.0
    bad_fraction: float = 0.0

    def __post_init__(self):
        if self.count < 0:
            raise ValueError(f"count={self.count}: the number of orders cannot be negative")
        for name in ("late_fraction", "bad_fraction"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name}={value}: must be between 0 and 1")
        if self.start is not None and self.start.tzinfo is None:
            raise ValueError(f"start={self.start.isoformat()}: give a timezone-aware time (UTC)")


@dataclass(frozen=True)
class GeneratedOrder:
    key: str
    sent_at: dt.datetime
    order: dict | None  # the Avro record, or None for a value that is not Avro at all
    kind: str = "valid"  # "valid", "late" or one of BAD_KINDS
    raw_value: bytes | None = field(default=None, repr=False)

    def record(self) -> dict:
        """The Avro record; a ValueError for a value that is not Avro (a ``not-avro`` bad order)."""
        if self.order is None:
            raise ValueError(f"order {self.key} ({self.kind}) is not an Avro record")
        return self.order


def generate_orders(config: GeneratorConfig) -> Iterator[GeneratedOrder]:
    rng = random.Random(config.seed)
    start = config.start or (dt.datetime.now(dt.UTC) - dt.timedelta(seconds=config.count * config.interval_seconds))
    for i in range(config.count):
        sent_at = start + dt.timedelta(seconds=i * config.interval_seconds)
        order_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        late = rng.random() < config.late_fraction
        lag = config.late_seconds if late else rng.uniform(0.0, 5.0)
        # Millisecond precision, as timestamp-millis carries it.
        bid_time = (sent_at - dt.timedelta(seconds=lag)).replace(microsecond=0) + dt.timedelta(
            milliseconds=rng.randrange(1000)
        )
        order = {
            "order_id": order_id,
            "bid_time": bid_time,
            "price": f"{rng.uniform(1.0, 150.0):.2f}",
            "item": rng.choice(ITEMS),
            "supplier": rng.choice(SUPPLIERS),
        }
        kind = "late" if late else "valid"
        if rng.random() < config.bad_fraction:
            kind = rng.choice(BAD_KINDS)
            if kind == "missing-field":
                order["supplier"] = None
            elif kind == "price-out-of-range":
                order["price"] = "123456789.00"
            elif kind == "price-not-a-number":
                order["price"] = "twelve"
        raw = b"\x01not an avro record" if kind == "not-avro" else None
        yield GeneratedOrder(key=order_id, sent_at=sent_at, order=None if raw else order, kind=kind, raw_value=raw)


@dataclass(frozen=True)
class SupplierChange:
    """One record of the supplier dimension: a supplier's state from ``updated_at`` on (its Kafka
    timestamp too); ``record`` None for the region a bad record leaves out."""

    supplier: str
    updated_at: dt.datetime
    region: str | None
    tier: str

    def record(self) -> dict:
        return {"supplier": self.supplier, "region": self.region, "tier": self.tier, "updated_at": self.updated_at}


@dataclass(frozen=True)
class SuppliersConfig:
    """The dimension over the span of a run of orders: every supplier's state just before ``start``,
    then ``changes`` changes of a region or tier at times within ``span_seconds`` after it; ``bad``
    records that leave the region out."""

    seed: int = 7
    start: dt.datetime | None = None  # default: now less span_seconds
    span_seconds: float = 100.0
    changes: int = 3
    bad: int = 0

    def __post_init__(self):
        for name in ("changes", "bad"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}={getattr(self, name)}: cannot be negative")
        if self.span_seconds < 0:
            raise ValueError(f"span_seconds={self.span_seconds}: cannot be negative")
        if self.start is not None and self.start.tzinfo is None:
            raise ValueError(f"start={self.start.isoformat()}: give a timezone-aware time (UTC)")


def generate_suppliers(config: SuppliersConfig) -> list[SupplierChange]:
    """The dimension's records in time order, deterministic under the seed."""
    rng = random.Random(config.seed)
    start = config.start or (dt.datetime.now(dt.UTC) - dt.timedelta(seconds=config.span_seconds))
    start = start.replace(microsecond=0)  # timestamp-millis, as the record carries it
    state = {supplier: (rng.choice(REGIONS), rng.choice(TIERS)) for supplier in SUPPLIERS}
    records = [SupplierChange(s, start - dt.timedelta(seconds=1), *state[s]) for s in SUPPLIERS]
    times = sorted(rng.uniform(0.0, config.span_seconds) for _ in range(config.changes + config.bad))
    bad_at = set(rng.sample(range(len(times)), config.bad))
    for i, offset in enumerate(times):
        at = start + dt.timedelta(milliseconds=int(offset * 1000))
        supplier = rng.choice(SUPPLIERS)
        region, tier = state[supplier]
        if i in bad_at:
            records.append(SupplierChange(supplier, at, None, tier))
            continue
        if rng.random() < 0.5:
            region = rng.choice([r for r in REGIONS if r != region])
        else:
            tier = rng.choice([t for t in TIERS if t != tier])
        state[supplier] = (region, tier)
        records.append(SupplierChange(supplier, at, region, tier))
    return records


@dataclass(frozen=True)
class ProduceReport:
    produced: int
    by_kind: dict[str, int]
    first_sent_at: str | None
    last_sent_at: str | None
    # partition -> (first offset, the offset after the last) of the records sent, as the broker acknowledged them
    offsets: dict[int, tuple[int, int]] = field(default_factory=dict)


def produce_orders(
    orders: list[GeneratedOrder],
    settings: Settings,
    topic: str | None = None,
    progress: Callable[[str], None] = log.info,
    progress_every_s: float = 5.0,
    value_schema: str | None = None,
) -> ProduceReport:
    """Send the orders to ``topic`` (default: the settings' orders topic) of the settings' Kafka;
    returns once every record is acknowledged (idempotent producer, acks=all).

    ``progress`` gets a line at most every ``progress_every_s`` seconds while sending. The values
    are written with ``value_schema`` (default: the catalog's), registered if it is new, as any
    producer's serializer does."""
    records = [(o.key, o.sent_at, o.raw_value or o.record()) for o in orders]
    report = produce_records(
        records,
        settings,
        topic or settings.orders_topic,
        value_schema or orders_avro_schema_json(),
        progress,
        progress_every_s,
    )
    return dataclasses.replace(report, by_kind=dict(Counter(order.kind for order in orders)))


def produce_suppliers(changes: list[SupplierChange], settings: Settings, progress: Callable[[str], None] = log.info):
    """Send the dimension's records to the settings' suppliers topic, keyed by supplier."""
    records = [(c.supplier, c.updated_at, c.record()) for c in changes]
    report = produce_records(records, settings, settings.suppliers_topic, suppliers_avro_schema_json(), progress)
    bad = sum(1 for c in changes if c.region is None)
    return dataclasses.replace(report, by_kind={"valid": len(changes) - bad, **({"missing-field": bad} if bad else {})})


def produce_records(
    records: Sequence[tuple[str, dt.datetime, dict | bytes]],
    settings: Settings,
    topic: str,
    value_schema: str,
    progress: Callable[[str], None] = log.info,
    progress_every_s: float = 5.0,
) -> ProduceReport:
    """Send (key, time, value) records to ``topic``: a dict value Avro-serialized with ``value_schema``
    (registered if it is new, as any producer's serializer does), bytes as they are; returns once
    every record is acknowledged (idempotent producer, acks=all)."""
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    registry = SchemaRegistryClient(registry_client_conf(settings))
    serializer = AvroSerializer(registry, value_schema)
    producer = Producer({**kafka_conf(settings), "enable.idempotence": True, "linger.ms": 20})
    failures: list[str] = []
    offsets: dict[int, tuple[int, int]] = {}

    def delivered(error, message):
        if error is not None:
            failures.append(f"{message.key()!r}: {error}")
            return
        first, after = offsets.get(message.partition(), (message.offset(), message.offset() + 1))
        offsets[message.partition()] = (min(first, message.offset()), max(after, message.offset() + 1))

    context = SerializationContext(topic, MessageField.VALUE)
    last_progress = time.monotonic()
    for i, (key, sent_at, value) in enumerate(records, start=1):
        producer.produce(
            topic,
            key=key.encode(),
            value=value if isinstance(value, bytes) else serializer(value, context),
            on_delivery=delivered,
            timestamp=int(sent_at.timestamp() * 1000),
        )
        producer.poll(0)
        if time.monotonic() - last_progress >= progress_every_s:
            last_progress = time.monotonic()
            progress(f"produced {i} of {len(records)} records to {topic}")
    remaining = producer.flush(60)
    if remaining or failures:
        raise RuntimeError(f"{remaining} records not acknowledged, {len(failures)} failed: {failures[:3]}")
    return ProduceReport(
        produced=len(records),
        by_kind={},
        first_sent_at=records[0][1].isoformat() if records else None,
        last_sent_at=records[-1][1].isoformat() if records else None,
        offsets=dict(sorted(offsets.items())),
    )

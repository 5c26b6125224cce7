"""The order generator: the reference's mock source, deterministic under a seed.

``generate_orders`` is pure: the same config gives the same records, so a test can compute the
expected archive, tables and window totals independently of the pipeline. ``produce_orders`` sends
them to Kafka with confluent-kafka's schema-registry Avro serializer (Confluent wire format).

Time is simulated: order ``i`` is "sent" at ``start + i * interval`` (its Kafka timestamp) and its
bid_time lies within the 5 seconds before that, as in the reference. Late records lag by
``late_seconds`` instead; bad records exercise the dead-letter path.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from lineage_assets.connections import kafka_conf, registry_client_conf
from lineage_assets.datasets import orders_avro_schema_json
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
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    topic = topic or settings.orders_topic
    registry = SchemaRegistryClient(registry_client_conf(settings))
    serializer = AvroSerializer(registry, value_schema or orders_avro_schema_json())
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
    for i, order in enumerate(orders, start=1):
        value = order.raw_value if order.order is None else serializer(order.order, context)
        producer.produce(
            topic,
            key=order.key.encode(),
            value=value,
            on_delivery=delivered,
            timestamp=int(order.sent_at.timestamp() * 1000),
        )
        producer.poll(0)
        if time.monotonic() - last_progress >= progress_every_s:
            last_progress = time.monotonic()
            progress(f"produced {i} of {len(orders)} orders")
    remaining = producer.flush(60)
    if remaining or failures:
        raise RuntimeError(f"{remaining} orders not acknowledged, {len(failures)} failed: {failures[:3]}")
    return ProduceReport(
        produced=len(orders),
        by_kind=dict(Counter(order.kind for order in orders)),
        first_sent_at=orders[0].sent_at.isoformat() if orders else None,
        last_sent_at=orders[-1].sent_at.isoformat() if orders else None,
        offsets=dict(sorted(offsets.items())),
    )

"""Helpers of the capture tests: a source table, random changes, reading the topic."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition

from spark_examples import change_format
from spark_examples.capture import triggers as capture_triggers
from spark_examples.capture.shipper import OP_HEADER, SEQ_HEADER
from spark_examples.change_format import SCHEMA_OPERATION
from spark_examples.databases import Database

ITEM_COLUMNS = {"id": "integer", "name": "text", "price": "numeric", "active": "boolean"}


@dataclass(frozen=True)
class Shipped:
    offset: int
    seq: int
    op: str
    key: bytes
    value: bytes | None


def create_items(db: Database) -> None:
    db.create_table("items", ITEM_COLUMNS, ["id"])


def random_change(db: Database, chooser: random.Random, next_id: list[int]) -> None:
    """One insert, update, delete or primary-key change of ``items`` (autocommitted)."""
    existing = [row[0] for row in db.execute("SELECT id FROM items ORDER BY id LIMIT 200")]
    kind = (
        chooser.choice(["insert", "insert", "update", "delete", "rekey"]) if existing else "insert"
    )
    if kind == "insert":
        next_id[0] += 1
        db.execute(
            "INSERT INTO items (id, name, price, active) VALUES (?, ?, ?, ?)",
            [next_id[0], f"item {next_id[0]}", f"{chooser.randint(0, 9999)}.25", True],
        )
        return
    target = chooser.choice(existing)
    if kind == "update":
        db.execute(
            "UPDATE items SET name = ?, active = ? WHERE id = ?",
            [f"renamed {chooser.random():.6f}", chooser.random() < 0.5, target],
        )
    elif kind == "delete":
        db.execute("DELETE FROM items WHERE id = ?", [target])
    else:
        next_id[0] += 1
        db.execute("UPDATE items SET id = ? WHERE id = ?", [next_id[0], target])


def read_topic(
    bootstrap: str, topic: str, timeout_s: float = 60.0, schemas: bool = False
) -> list[Shipped]:
    """Every committed record of partition 0 of ``topic`` (read_committed), in offset order;
    the schema records (change_format.py) only with ``schemas``."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"reader-{time.monotonic_ns()}",
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
    })  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    shipped: list[Shipped] = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    return shipped
                raise AssertionError(f"consumer error: {error}")
            headers = dict(message.headers() or [])
            if headers[OP_HEADER] == SCHEMA_OPERATION.encode() and not schemas:
                continue
            shipped.append(Shipped(
                message.offset(),
                int(headers[SEQ_HEADER]),
                headers[OP_HEADER].decode(),
                message.key(),
                message.value(),
            ))  # fmt: skip
    finally:
        consumer.close()
    raise AssertionError(f"topic {topic} not read to its end within {timeout_s}s")


def final_state(shipped: list[Shipped]) -> dict[tuple[str, str], dict[str, Any]]:
    """What a destination applying ``shipped`` in order holds: (table, key json) -> row."""
    state: dict[tuple[str, str], dict[str, Any]] = {}
    for record in shipped:
        table, pk = change_format.decode_key(record.key)
        identity = (table, repr(sorted(pk.items())))
        if record.value is None:
            state.pop(identity, None)
        else:
            state[identity] = change_format.decode_value(record.value).row
    return state


def source_state(db: Database, table: str) -> dict[tuple[str, str], dict[str, Any]]:
    """The rows of ``table`` keyed as in ``final_state``."""
    key = db.primary_key(table)
    return {(table, repr(sorted((k, row[k]) for k in key))): row for row in db.rows(table)}


def last_sequence(db: Database) -> int:
    return capture_triggers.last_issued_seq(db)

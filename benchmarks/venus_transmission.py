"""Workload 4, the VENUS transmission test: N JSON row changes, first send to last receive.

One partition, one producer (acks=all, otherwise the client's defaults) and one
consumer in its own process, already assigned and positioned at offset 0 before
the clock starts. The time runs from the first send to the moment the consumer
holds the last record, on the system-wide monotonic clock both processes share.
Run with kafka-python and with confluent-kafka.
"""

from __future__ import annotations

import json
import multiprocessing
import time
from multiprocessing.synchronize import Event
from typing import Any

from benchmarks.brokers import RunningBroker
from benchmarks.workloads import TIMEOUT_S, create_topic, send

CLIENTS = ("kafka-python", "confluent-kafka")
TABLE_ROWS = 10_000  # row changes update rows of a table this big, so keys repeat


def row_change(sequence: int) -> bytes:
    """One change-data-capture record: an update of an order row, before and after."""
    row_id = sequence % TABLE_ROWS
    before = {"id": row_id, "customer": f"c{row_id % 977}", "amount": sequence - 1, "st": "new"}
    after = {**before, "amount": sequence, "st": "paid"}
    change = {"op": "u", "table": "orders", "seq": sequence, "before": before, "after": after}
    return json.dumps(change, separators=(",", ":")).encode()


def transmission(broker: RunningBroker, client: str, count: int) -> dict[str, float]:
    """Sends ``count`` row changes with ``client``; returns seconds (first send to last
    receive), records/s, and the seconds until the producer had every acknowledgement."""
    topic = broker.topic(f"venus-{client}")
    create_topic(broker, topic)
    rows = [(str(index % TABLE_ROWS).encode(), row_change(index)) for index in range(count)]
    context = multiprocessing.get_context("spawn")
    ready, results = context.Event(), context.Queue()
    reader = context.Process(
        target=_receive, args=(client, broker.bootstrap, topic, count, ready, results)
    )
    reader.start()
    try:
        if not ready.wait(60):
            raise RuntimeError(f"{client} consumer never became ready")
        first_send, producer_cpu = time.monotonic(), time.process_time()
        _send(client, broker.bootstrap, topic, rows)
        sent = time.monotonic()  # every record acknowledged
        producer_cpu = time.process_time() - producer_cpu
        last_receive, received, consumer_cpu = results.get(timeout=TIMEOUT_S)
    finally:
        reader.join(TIMEOUT_S)
        if reader.is_alive():
            reader.kill()
    if received < count:
        raise RuntimeError(f"{client} consumer received {received} of {count}")
    seconds = last_receive - first_send
    return {
        "seconds": seconds,
        "records_per_s": count / seconds,
        "send_seconds": sent - first_send,
        # The clients' own CPU: on 2 cores it competes with the broker's.
        "producer_cpu_s": producer_cpu,
        "consumer_cpu_s": consumer_cpu,
    }


def _send(client: str, bootstrap: str, topic: str, rows: list[tuple[bytes, bytes]]) -> None:
    if client == "kafka-python":
        from kafka import KafkaProducer

        producer: Any = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
        for key, value in rows:
            producer.send(topic, value=value, key=key)
        producer.flush(TIMEOUT_S)
        producer.close()
        return
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for key, value in rows:
        send(producer, topic, value, key)
    if producer.flush(TIMEOUT_S):
        raise RuntimeError("confluent-kafka producer did not deliver every record")


def _receive(
    client: str, bootstrap: str, topic: str, count: int, ready: Event, results: Any
) -> None:
    """Consumer process: signal ready once positioned, report (last receive time, count,
    CPU seconds from ready to the last receive)."""
    received = 0
    last_receive = float("nan")
    deadline = time.monotonic() + TIMEOUT_S
    if client == "kafka-python":
        from kafka import KafkaConsumer, TopicPartition

        consumer: Any = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek(TopicPartition(topic, 0), 0)
        consumer.poll(200)  # connected and fetching before the producer starts
        cpu_before = time.process_time()
        ready.set()
        while received < count and time.monotonic() < deadline:
            batches = consumer.poll(100, max_records=10_000)
            received += sum(len(records) for records in batches.values())
            last_receive = time.monotonic()
    else:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "venus",
                             "enable.auto.commit": False})  # fmt: skip
        consumer.assign([TopicPartition(topic, 0, 0)])
        consumer.consume(1, 0.2)
        cpu_before = time.process_time()
        ready.set()
        while received < count and time.monotonic() < deadline:
            messages = consumer.consume(10_000, 0.1)
            received += sum(1 for message in messages if message.error() is None)
            last_receive = time.monotonic()
    cpu_seconds = time.process_time() - cpu_before
    consumer.close()
    results.put((last_receive, received, cpu_seconds))

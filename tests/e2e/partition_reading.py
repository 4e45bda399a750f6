"""Reading one assigned partition with confluent-kafka up to a known end."""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka import Consumer, KafkaError, Message

from tests.e2e.client_helpers import Deadline


def consume_until_end(
    consumer: Consumer, end_offset: int, deadline: Deadline, on_record: Callable[[Message], None]
) -> None:
    """Hands each consumed record to ``on_record`` until librdkafka reports the end of the
    partition at ``end_offset`` or later (the consumer needs ``enable.partition.eof``). The
    end-of-partition event's offset is the fetch position, which also crosses offsets
    with no record left (a compacted view's), where the last record's offset would not."""
    while True:
        assert not deadline.expired(), f"no end of partition at {end_offset}"
        message = consumer.poll(deadline.poll_timeout_s())
        if message is None:
            continue
        error, offset = message.error(), message.offset()
        assert offset is not None
        if error is None:
            on_record(message)
            continue
        assert error.code() == KafkaError._PARTITION_EOF, error
        if offset >= end_offset:
            return

"""``kshim.delay.max.ms`` set to a minute, the same verdicts on kshim's broker and through a
gateway given ``--delay-max-ms``: a record due in two minutes is refused with INVALID_RECORD
(by ``kshim-deliver-at`` or ``kshim-delay-ms``), one due in 30 s is stored."""

from __future__ import annotations

from confluent_kafka import KafkaError

from tests.e2e.delay_records import (
    DELAY_SUFFIX,
    Outgoing,
    confluent_producer,
    delay_ms,
    deliver_at,
    now_ms,
    produce,
)

MAX_DELAY_MS = 60_000


def furthest_due_time_is_the_setting(bootstrap: str, topic: str) -> None:
    """Against a broker (or gateway) whose furthest due time is MAX_DELAY_MS, ``topic``'s
    ``T.delay`` empty."""
    producer = confluent_producer(bootstrap)
    start = now_ms()
    refused = [
        Outgoing(b"k", b"+120 s", (deliver_at(start + 120_000),)),
        Outgoing(b"k", b"+120 s", (delay_ms(120_000),), start),
    ]
    accepted = [
        Outgoing(b"k", b"+30 s", (deliver_at(start + 30_000),)),
        Outgoing(b"k", b"+30 s", (delay_ms(30_000),), start),
    ]
    for record in refused:  # one batch each
        assert produce(producer, topic + DELAY_SUFFIX, [record]) == [
            (KafkaError.INVALID_RECORD, None)
        ]
    for offset, record in enumerate(accepted):
        assert produce(producer, topic + DELAY_SUFFIX, [record]) == [(None, offset)]

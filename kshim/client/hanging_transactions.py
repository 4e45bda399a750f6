"""Hanging transactions, as kafka-transactions.sh find-hanging defines them (KIP-664): a
producer's transaction open on a partition, older than the longest transaction timeout,
that its coordinator will never end there (``kshim transactions find-hanging``, whose
module says the rule in full).
"""

from __future__ import annotations

from dataclasses import dataclass

from kshim.client.transaction_admin import TransactionAdmin
from kshim.client.transaction_descriptions import ProducerState, TransactionDescription


@dataclass(frozen=True, slots=True)
class OpenTransaction:
    """A producer's transaction open on one partition (find-hanging)."""

    topic: str
    partition: int
    producer: ProducerState

    def to_json(self, now_ms: int) -> dict[str, object]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "producer_id": self.producer.producer_id,
            "producer_epoch": self.producer.producer_epoch,
            "coordinator_epoch": self.producer.coordinator_epoch,
            "start_offset": self.producer.transaction_start_offset,
            "last_timestamp": self.producer.last_timestamp,
            "duration_ms": now_ms - self.producer.last_timestamp,
        }


def hanging_transactions(
    admin: TransactionAdmin,
    topic: str,
    producers: dict[int, list[ProducerState]],
    now_ms: int,
    max_timeout_ms: float,
) -> list[OpenTransaction]:
    """The transactions open on ``topic``'s partitions (``producers``, by partition, as the
    leaders describe them) that are hanging at ``now_ms``, by partition then producer id;
    raises what TransactionAdmin's listing and describing raise."""
    candidates = open_transactions(topic, producers, now_ms, max_timeout_ms)
    if not candidates:
        return []
    producer_ids = {candidate.producer.producer_id for candidate in candidates}
    listed = admin.list_transactions(producer_ids=producer_ids)
    # Kafka's tool ignores a listing of a producer id it did not ask about.
    transactional_ids = {
        listing.producer_id: listing.transactional_id
        for listing in listed
        if listing.producer_id in producer_ids
    }
    descriptions = admin.describe_transactions(transactional_ids.values())
    return hanging(candidates, transactional_ids, descriptions)


def open_transactions(
    topic: str, producers: dict[int, list[ProducerState]], now_ms: int, max_timeout_ms: float
) -> list[OpenTransaction]:
    """The candidates: transactions open on a partition whose producer last wrote there
    longer than ``max_timeout_ms`` ago, by partition then producer id."""
    return [
        OpenTransaction(topic, partition, producer)
        for partition, states in sorted(producers.items())
        for producer in sorted(states, key=lambda state: state.producer_id)
        if producer.transaction_start_offset >= 0
        and now_ms - producer.last_timestamp > max_timeout_ms
    ]


def hanging(
    candidates: list[OpenTransaction],
    transactional_ids: dict[int, str],
    descriptions: dict[str, TransactionDescription | None],
) -> list[OpenTransaction]:
    """The candidates whose coordinator will not end them on their partition: no
    transactional id listed for the producer, none known to the coordinator, or one whose
    current transaction does not include the partition."""
    found = []
    for candidate in candidates:
        transactional_id = transactional_ids.get(candidate.producer.producer_id)
        description = None if transactional_id is None else descriptions.get(transactional_id)
        if (
            description is None
            or (candidate.topic, candidate.partition) not in description.partitions
        ):
            found.append(candidate)
    return found

"""Shared pieces of the scenarios: topic names, record sets, the reference client, skips."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

import pytest

from compat_tests.brokers import (
    END_TXN_KEY,
    GROUPS_MISSING,
    JOIN_GROUP_KEY,
    TRANSACTIONS_MISSING,
    BrokerUnderTest,
    kshim_lacks,
)
from compat_tests.clients import text_records
from compat_tests.driver_kafka_python import KafkaPythonDriver
from tests.e2e.client_helpers import ConsumedRecord, SampleRecord, sample_records

RECORD_COUNT = 12
HALF = RECORD_COUNT // 2
MIDDLE_OFFSET = HALF + 2  # inside the second batch
TOPIC_ALREADY_EXISTS = 36
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10


# Every topic name handed out in this session, so that the topics created on a shared
# (external) Kafka can be deleted at its end; see delete_session_topics.
_SESSION_TOPICS: set[str] = set()


def topic_name(label: str) -> str:
    """A topic no other scenario uses, in this run or an earlier one on a long-lived Kafka,
    so scenarios can share one broker and none assumes it is empty."""
    name = f"compat-{label}-{uuid.uuid4().hex[:10]}"
    _SESSION_TOPICS.add(name)
    return name


def delete_session_topics(broker: BrokerUnderTest) -> list[str]:
    """Deletes from ``broker`` the topics that this session named and it holds (created by a
    scenario or auto-created by a client); returns them. Topics of anyone else are never
    touched: the names carry this session's random suffixes."""
    ours = sorted(_SESSION_TOPICS & reference().list_topics(broker.bootstrap))
    if ours:
        reference().delete_topics(broker.bootstrap, ours)
    return ours


def reference() -> KafkaPythonDriver:
    """The client that sets up and checks what a scenario's client under test did.

    kafka-python: it speaks the newest versions of the Python clients and works against
    every broker in the matrix for plain produce, assign-mode fetch and CreateTopics.
    """
    return KafkaPythonDriver()


def create_topic(
    broker: BrokerUnderTest,
    label: str,
    partitions: int = 1,
    configs: Mapping[str, str] | None = None,
) -> str:
    topic = topic_name(label)
    assert reference().create_topic(broker.bootstrap, topic, partitions, configs) == 0
    return topic


def records_for(client: str, count: int = RECORD_COUNT) -> list[SampleRecord]:
    """The richest records ``client`` can produce (see client_helpers.sample_records).

    kafka-python and aiokafka refuse null header values and null-key-null-value records;
    librdkafka sends both; kcat sends printable lines with one set of headers.
    """
    if client == "kcat":
        return text_records(count)
    if client == "confluent":
        return sample_records(count, null_header_values=True, null_key_and_value=True)
    return sample_records(count)


def halves(records: Sequence[SampleRecord]) -> list[Sequence[SampleRecord]]:
    middle = len(records) // 2
    return [records[:middle], records[middle:]]


def without_timestamps(records: Sequence[ConsumedRecord]) -> list[ConsumedRecord]:
    """For records whose producer (kcat) cannot set timestamps: compare the rest."""
    return [
        ConsumedRecord(record.offset, record.key, record.value, record.headers, 0)
        for record in records
    ]


def comparable(client: str, records: Sequence[ConsumedRecord]) -> list[ConsumedRecord]:
    return without_timestamps(records) if client == "kcat" else list(records)


def require_transactions(broker: BrokerUnderTest) -> None:
    """Skips on kshim until it advertises EndTxn (26); other brokers always run."""
    if broker.name == "kshim" and kshim_lacks(END_TXN_KEY):
        pytest.skip(TRANSACTIONS_MISSING)


def require_groups(broker: BrokerUnderTest) -> None:
    """Skips on kshim until it advertises JoinGroup (11); other brokers always run."""
    if broker.name == "kshim" and kshim_lacks(JOIN_GROUP_KEY):
        pytest.skip(GROUPS_MISSING)


def require_client(client: str) -> None:
    if client == "kcat":
        from compat_tests.driver_kcat import UNAVAILABLE

        if UNAVAILABLE is not None:
            pytest.skip(UNAVAILABLE)

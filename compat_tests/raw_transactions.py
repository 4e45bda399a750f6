"""Raw transactional requests for the differential scenarios, on any broker.

A fresh Kafka creates its transaction state log when a client first looks for a
transaction coordinator (FindCoordinator with key type 1), its offsets topic when one
first looks for a group coordinator (key type 0), and then loads them, answering
COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS meanwhile;
a Java producer retries those, so ``init_producer`` does too. A transaction's markers
are written after EndTxn returns (Kafka's TransactionMarkerChannelManager), so the next
transaction of the same id may meet CONCURRENT_TRANSACTIONS, which is retried as well.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from compat_tests.brokers import BrokerUnderTest
from compat_tests.conformance_probe import (
    Probe,
    Producer,
    add_partitions_request,
    transactional_request,
)

FIND_COORDINATOR, INIT_PRODUCER_ID, ADD_PARTITIONS, ADD_OFFSETS, END_TXN = 10, 22, 24, 25, 26
GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE = 0, 1
INIT_PRODUCER_ID_V, ADD_PARTITIONS_V, ADD_OFFSETS_V, END_TXN_V, FIND_COORDINATOR_V = 4, 3, 3, 3, 3
# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
# CONCURRENT_TRANSACTIONS: what a Java producer retries.
RETRIABLE = frozenset({14, 15, 16, 51})
LIST_OFFSETS, LIST_OFFSETS_V = 2, 1
NEW_TOPIC_ERRORS = frozenset({3, 6})  # UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER
LEADER_NOT_READY = 16  # counted as NOT_COORDINATOR: retried the same way
READY_TIMEOUT_S = 60.0
RETRY_INTERVAL_S = 0.1
TRANSACTION_TIMEOUT_MS = 60_000


def probe(broker: BrokerUnderTest) -> Probe:
    return Probe(broker.host, broker.port)


def retried(call: Callable[[], Any], timeout_s: float = READY_TIMEOUT_S) -> Any:
    """The first response of ``call`` whose error code is not one a client retries; raises
    AssertionError when the broker keeps answering one past ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        response = call()
        if int(response.error_code) not in RETRIABLE:
            return response
        assert time.monotonic() < deadline, f"still retriable after {timeout_s} s: {response}"
        time.sleep(RETRY_INTERVAL_S)


def wait_for_leader(broker: BrokerUnderTest, topic: str) -> None:
    """Returns once partition 0 of a new ``topic`` takes requests: Kafka answers
    UNKNOWN_TOPIC_OR_PARTITION or NOT_LEADER_OR_FOLLOWER until its leader is elected."""
    request = {
        "replica_id": -1,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
    }

    def list_latest() -> Any:
        [answer] = probe(broker).call(LIST_OFFSETS, LIST_OFFSETS_V, request).topics
        [partition] = answer.partitions
        code = int(partition.error_code)
        return _ErrorCode(LEADER_NOT_READY if code in NEW_TOPIC_ERRORS else code)

    assert int(retried(list_latest).error_code) == 0


def find_group_coordinator(broker: BrokerUnderTest, group: str) -> None:
    """Returns once the broker coordinates ``group`` (a fresh Kafka creates its offsets
    topic on the first such request)."""
    find = {"key": group, "key_type": GROUP_KEY_TYPE}
    response = retried(lambda: probe(broker).call(FIND_COORDINATOR, FIND_COORDINATOR_V, find))
    assert int(response.error_code) == 0, response


def init_producer(broker: BrokerUnderTest, transactional_id: str) -> Producer:
    """A transactional producer's id and epoch, once the broker's coordinator is ready."""
    raw = probe(broker)
    find = {"key": transactional_id, "key_type": TRANSACTION_KEY_TYPE}
    retried(lambda: raw.call(FIND_COORDINATOR, FIND_COORDINATOR_V, find))
    request = {"transactional_id": transactional_id, "transaction_timeout": TRANSACTION_TIMEOUT_MS}
    response = retried(lambda: raw.call(INIT_PRODUCER_ID, INIT_PRODUCER_ID_V, request))
    assert int(response.error_code) == 0, response
    return Producer(response.producer_id, response.producer_epoch)


def add_offsets(
    broker: BrokerUnderTest, transactional_id: str, producer: Producer, group: str
) -> int:
    """AddOffsetsToTxn's error code."""
    request = transactional_request(transactional_id, producer, group_id=group)
    return _error_code(broker, ADD_OFFSETS, ADD_OFFSETS_V, request)


def add_partition(
    broker: BrokerUnderTest, transactional_id: str, producer: Producer, topic: str
) -> int:
    """AddPartitionsToTxn's error code for partition 0 of ``topic``."""
    request = add_partitions_request(transactional_id, producer, topic)

    def call() -> Any:
        response = probe(broker).call(ADD_PARTITIONS, ADD_PARTITIONS_V, request)
        [result] = response.results_by_topic_v3_and_below
        [partition] = result.results_by_partition
        return _ErrorCode(int(partition.partition_error_code))

    return int(retried(call).error_code)


def end_transaction(
    broker: BrokerUnderTest, transactional_id: str, producer: Producer, commit: bool
) -> int:
    """EndTxn's error code."""
    request = transactional_request(transactional_id, producer, committed=commit)
    return _error_code(broker, END_TXN, END_TXN_V, request)


def _error_code(
    broker: BrokerUnderTest, api_key: int, version: int, request: dict[str, Any]
) -> int:
    """The error code of the first answer to ``request`` that a client would not retry."""
    return int(retried(lambda: probe(broker).call(api_key, version, request)).error_code)


class _ErrorCode:
    """A response reduced to its error code, for ``retried``."""

    def __init__(self, error_code: int) -> None:
        self.error_code = error_code

"""After EndTxn, a transaction's markers land, and its producer gets through by retrying.

Kafka answers EndTxn once the outcome is durable (PrepareCommit / PrepareAbort) and writes
the markers afterwards, retrying until they land (TransactionMarkerChannelManager); until
then the producer's next request is answered CONCURRENT_TRANSACTIONS and retried. kshim
writes the markers before it answers, unless writing them fails: then it answers the same
way and retries them in the background (tests/broker/test_transaction_marker_retries.py
injects that failure). Both brokers must keep the contract the Java producer relies on,
checked here with the same raw requests on each: EndTxn answers NONE; the id's next
request succeeds once CONCURRENT_TRANSACTIONS is retried, and nothing else is answered;
the markers land (the last stable offset passes them, the transaction is complete).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from compat_tests.brokers import BrokerUnderTest
from compat_tests.raw_transactions import (
    add_partition,
    end_transaction,
    init_producer,
    probe,
    retried,
    wait_for_leader,
)
from compat_tests.support import create_topic, require_transactions

pytestmark = [pytest.mark.wire, pytest.mark.timeout(120)]

LIST_OFFSETS, DESCRIBE_TRANSACTIONS = 2, 65
LIST_OFFSETS_V, DESCRIBE_TRANSACTIONS_V = 5, 0
LATEST, READ_COMMITTED = -1, 1
NONE = 0
RECORDS = 3
ROUNDS = (True, False, True)  # commit, abort, commit
SETTLE_TIMEOUT_S = 30.0


def test_each_transaction_ends_and_the_next_one_starts(broker: BrokerUnderTest) -> None:
    require_transactions(broker)
    topic = create_topic(broker, "markers")
    wait_for_leader(broker, topic)
    raw = probe(broker)
    transactional_id = raw.name("markers")
    producer = init_producer(broker, transactional_id)

    for number, commit in enumerate(ROUNDS):
        # Retried on CONCURRENT_TRANSACTIONS while the previous markers are written.
        assert add_partition(broker, transactional_id, producer, topic) == NONE
        raw.produce(topic, RECORDS, producer, number * RECORDS, True, transactional_id)
        assert end_transaction(broker, transactional_id, producer, commit) == NONE

    # Every batch and its marker: the last stable offset reaches the log end.
    log_end = len(ROUNDS) * (RECORDS + 1)
    assert eventually(lambda: last_stable_offset(broker, topic), log_end) == log_end
    state = eventually(lambda: transaction_state(broker, transactional_id), "CompleteCommit")
    assert state == "CompleteCommit"
    again = init_producer(broker, transactional_id)  # a new instance, retried likewise
    assert (again.producer_id, again.epoch) == (producer.producer_id, producer.epoch + 1)


def last_stable_offset(broker: BrokerUnderTest, topic: str) -> int:
    request = {
        "replica_id": -1,
        "isolation_level": READ_COMMITTED,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": LATEST}]}],
    }
    [answer] = probe(broker).call(LIST_OFFSETS, LIST_OFFSETS_V, request).topics
    [partition] = answer.partitions
    assert int(partition.error_code) == NONE, partition
    return int(partition.offset)


def transaction_state(broker: BrokerUnderTest, transactional_id: str) -> str:
    """DescribeTransactions' state of the id (retried while the coordinator loads)."""
    request = {"transactional_ids": [transactional_id]}

    def describe() -> Any:
        response = probe(broker).call(DESCRIBE_TRANSACTIONS, DESCRIBE_TRANSACTIONS_V, request)
        [state] = response.transaction_states
        return state

    return str(retried(describe).transaction_state)


def eventually(read: Any, wanted: object) -> object:
    """``read()`` once it returns ``wanted``, or its last value after the timeout."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    value = read()
    while value != wanted and time.monotonic() < deadline:
        time.sleep(0.05)
        value = read()
    return value

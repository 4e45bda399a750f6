"""Conformance cases for the transaction APIs (transaction protocol V1, KIP-98)."""

from __future__ import annotations

import datetime
from typing import Any

from compat_tests.conformance_probe import (
    BASE_TIMESTAMP_MS,
    Exchange,
    Probe,
    add_partitions_request,
    transactional_request,
)

TRANSACTION_TIMEOUT_MS = 60_000
RECORDS = 3
OFFSET = 5
NOW_TOLERANCE = datetime.timedelta(minutes=5)


def add_partitions_to_txn(probe: Probe, version: int) -> Exchange:
    topic, transactional_id = probe.create_topic("add-partitions"), probe.name("txn")
    producer = probe.init_producer(transactional_id)
    request = add_partitions_request(transactional_id, producer, topic)
    result = {
        "name": topic,
        "results_by_partition": [{"partition_index": 0, "partition_error_code": 0}],
    }
    expected = {"throttle_time": 0, "results_by_topic_v3_and_below": [result]}
    return Exchange(request, lambda _: expected)


def add_offsets_to_txn(probe: Probe, version: int) -> Exchange:
    transactional_id, group = probe.name("txn"), probe.name("txn-group")
    producer = probe.init_producer(transactional_id)
    request = transactional_request(transactional_id, producer, group_id=group)
    return Exchange(request, lambda _: {"throttle_time": 0, "error_code": 0})


def end_txn(probe: Probe, version: int) -> Exchange:
    """Commits a transaction holding one batch on one partition."""
    topic, transactional_id = probe.create_topic("end-txn"), probe.name("txn")
    producer = probe.init_producer(transactional_id)
    probe.add_partition(transactional_id, producer, topic)
    probe.produce(topic, RECORDS, producer, transactional=True, transactional_id=transactional_id)
    request = transactional_request(transactional_id, producer, committed=True)
    return Exchange(request, lambda _: {"throttle_time": 0, "error_code": 0})


def txn_offset_commit(probe: Probe, version: int) -> Exchange:
    topic, transactional_id = probe.create_topic("txn-offsets"), probe.name("txn")
    group = probe.name("txn-offsets-group")
    producer = probe.init_producer(transactional_id)
    probe.add_offsets(transactional_id, producer, group)
    partition = {"partition_index": 0, "committed_offset": OFFSET, "committed_metadata": "m"}
    request = {
        "transactional_id": transactional_id,
        "group_id": group,
        "producer_id": producer.producer_id,
        "producer_epoch": producer.epoch,
        "generation_id": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [{"name": topic, "partitions": [partition]}],
    }
    answer = {"name": topic, "partitions": [{"partition_index": 0, "error_code": 0}]}
    return Exchange(request, lambda _: {"throttle_time": 0, "topics": [answer]})


def describe_producers(probe: Probe, version: int) -> Exchange:
    """An idempotent producer's state on the partition: last sequence and timestamp."""
    topic = probe.create_topic("producers")
    producer = probe.init_producer()
    probe.produce(topic, RECORDS, producer)
    request = {"topics": [{"name": topic, "partition_indexes": [0]}]}
    state = {
        "producer_id": producer.producer_id,
        "producer_epoch": producer.epoch,
        "last_sequence": RECORDS - 1,
        "last_timestamp": BASE_TIMESTAMP_MS + (RECORDS - 1) * 1000,  # the batch's max
        "coordinator_epoch": -1,
        "current_txn_start_offset": -1,
    }
    partition = {
        "partition_index": 0,
        "error_code": 0,
        "error_message": None,
        "active_producers": [state],
    }
    expected = {"throttle_time": 0, "topics": [{"name": topic, "partitions": [partition]}]}
    return Exchange(request, lambda _: expected)


def describe_transactions(probe: Probe, version: int) -> Exchange:
    """An ongoing transaction with one partition added."""
    topic, transactional_id = probe.create_topic("describe-txn"), probe.name("txn")
    producer = probe.init_producer(transactional_id)
    probe.add_partition(transactional_id, producer, topic)

    def expect(actual: Any) -> dict[str, Any]:
        [state] = actual.transaction_states
        started = state.transaction_start_time
        now = datetime.datetime.now(datetime.UTC)
        assert abs(now - started) < NOW_TOLERANCE, started
        return {
            "throttle_time": 0,
            "transaction_states": [
                {
                    "error_code": 0,
                    "transactional_id": transactional_id,
                    "transaction_state": "Ongoing",
                    "transaction_timeout": TRANSACTION_TIMEOUT_MS,
                    "transaction_start_time": started,
                    "producer_id": producer.producer_id,
                    "producer_epoch": producer.epoch,
                    "topics": [{"topic": topic, "partitions": [0]}],
                }
            ],
        }

    return Exchange({"transactional_ids": [transactional_id]}, expect)


def list_transactions(probe: Probe, version: int) -> Exchange:
    transactional_id = probe.name("txn")
    producer = probe.init_producer(transactional_id)
    request = {"state_filters": [], "producer_id_filters": [producer.producer_id]}
    state = {
        "transactional_id": transactional_id,
        "producer_id": producer.producer_id,
        "transaction_state": "Empty",
    }
    expected = {
        "throttle_time": 0,
        "error_code": 0,
        "unknown_state_filters": [],
        "transaction_states": [state],
    }
    return Exchange(request, lambda _: expected)

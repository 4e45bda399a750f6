"""Partition counts no broker can mean: CreatePartitions and CreateTopics past the size of
one batch of Kafka's controller, sent byte for byte to kshim and to Apache Kafka 3.9.

Kafka's KRaft controller writes the records of one admin request in one batch of at most
10,000 records (QuorumController.MAX_RECORDS_PER_USER_OP): a topic record per topic, a
partition record per partition, a config record per config set. Kafka 3.9 answers:

- CreateTopics asking for more than 10,000 partitions in all (num.partitions for -1):
  every topic POLICY_VIOLATION, "Excessively large number of partitions per request."
  (ReplicationControlManager.validateTotalNumberOfPartitions), before any other check;
- CreateTopics within that but past 10,000 records: every topic POLICY_VIOLATION,
  "Unable to perform excessively large batch operation." (EventHandlerExceptionInfo's
  answer to the full BoundedList);
- CreatePartitions adding more partitions than the batch has room for:
  UNKNOWN_SERVER_ERROR with no message (the controller catches the full BoundedList, and
  ApiError never sends that error's message). For a count such as 2^31-1 Kafka's replica
  placer runs out of memory first: the controller fails over and every topic of the
  request gets the same answer. Validate-only requests get the same answers.

The Kafka side is a Kafka of its own, as the 2^31-1 case makes its controller fail over.
A CreatePartitions past the batch that is not validate-only is sent to kshim only: Kafka
3.9 writes the partition records that fit before it refuses (intended difference K15).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from compat_tests.brokers import BrokerUnderTest, acts_as_kafka, fronted
from compat_tests.conformance_probe import Probe, create_topic_request
from compat_tests.kafka_sources import REFERENCE_JARS, jars_command, launched
from kshim.jvm import artifacts
from kshim.protocol.apis import ADVERTISED

pytestmark = [pytest.mark.wire, pytest.mark.timeout(240)]

METADATA, CREATE_TOPICS, CREATE_PARTITIONS = 3, 19, 37
METADATA_V = 12
NONE, UNKNOWN_SERVER_ERROR, TOPIC_ALREADY_EXISTS, POLICY_VIOLATION = 0, -1, 36, 44
FIRST_COUNTS_V = 5  # CreateTopics answers with partition counts from v5 (KIP-525)
BATCH = 10_000  # QuorumController.MAX_RECORDS_PER_USER_OP
LARGEST_COUNT = 2**31 - 1
TOO_MANY_PARTITIONS = "Excessively large number of partitions per request."
TOO_LARGE_BATCH = "Unable to perform excessively large batch operation."
PROMPTLY_S = 15.0  # Kafka answers each in well under a second; a broker that tries takes hours
SETTLE_TIMEOUT_S, SETTLE_POLL_S = 60.0, 0.2


def edges(api_key: int) -> list[int]:
    low, high = ADVERTISED[api_key]
    return sorted({low, high})


@pytest.fixture(scope="module")
def limited(broker: BrokerUnderTest) -> Iterator[BrokerUnderTest]:
    """kshim as it is; for Kafka, a Kafka of its own (the largest count fails its
    controller over, which the rest of the suite should not meet)."""
    if broker.name == "kshim":
        yield broker
        return
    if not acts_as_kafka(broker.name):
        pytest.skip(f"{broker.name}: not compared for requests past Kafka's controller batch")
    reason = artifacts.unavailable_reason(REFERENCE_JARS)
    if reason is not None:
        pytest.skip(reason)
    with (
        launched(jars_command(REFERENCE_JARS)) as kafka,
        fronted(broker.name, kafka.bootstrap) as front,
    ):
        yield front


def new_name(label: str) -> str:
    return f"compat-{label}-{uuid.uuid4().hex[:10]}"


def timed(broker: BrokerUnderTest, api_key: int, version: int, request: dict[str, Any]) -> Any:
    """The answer to ``request``, which must come within PROMPTLY_S."""
    started = time.monotonic()
    answer = Probe(broker.host, broker.port).call(api_key, version, request)
    elapsed = time.monotonic() - started
    assert elapsed < PROMPTLY_S, f"answered after {elapsed:.1f} s"
    return answer


def created_topic(broker: BrokerUnderTest, label: str) -> str:
    """A new topic of one partition, once the broker takes it up (after Kafka's
    controller is back from a failover: until then CreateTopics times out or is retried)."""
    topic = new_name(label)
    request = create_topic_request(topic)
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while True:
        [answer] = Probe(broker.host, broker.port).call(CREATE_TOPICS, 7, request).topics
        if int(answer.error_code) == NONE or time.monotonic() > deadline:
            break
        time.sleep(SETTLE_POLL_S)
    assert int(answer.error_code) == NONE, answer
    Probe(broker.host, broker.port).wait_for_leaders(topic)
    return topic


def partition_counts(broker: BrokerUnderTest, *topics: str) -> dict[str, int | None]:
    """Each topic's partition count in Metadata; None for a topic that does not exist."""
    request = {"topics": [{"name": topic} for topic in topics], "allow_auto_topic_creation": False}
    answer = Probe(broker.host, broker.port).call(METADATA, METADATA_V, request)
    return {
        topic.name: None if int(topic.error_code) else len(topic.partitions)
        for topic in answer.topics
    }


def grow(topic: str, count: int, validate_only: bool) -> dict[str, Any]:
    grown = {"name": topic, "count": count, "assignments": None}
    return {"topics": [grown], "timeout": 10_000, "validate_only": validate_only}


@pytest.mark.parametrize("version", edges(CREATE_PARTITIONS))
@pytest.mark.parametrize("validate_only", [True, False], ids=["validate", "create"])
def test_the_largest_partition_count_is_refused_and_nothing_is_added(
    limited: BrokerUnderTest, version: int, validate_only: bool
) -> None:
    topic = created_topic(limited, "largest-count")

    answer = timed(limited, CREATE_PARTITIONS, version, grow(topic, LARGEST_COUNT, validate_only))

    assert [(int(result.error_code), result.error_message) for result in answer.results] == [
        (UNKNOWN_SERVER_ERROR, None)
    ]
    created_topic(limited, "still-up")  # the broker goes on serving admin requests
    assert partition_counts(limited, topic) == {topic: 1}


@pytest.mark.parametrize("version", edges(CREATE_PARTITIONS))
def test_partitions_added_up_to_one_controller_batch(
    limited: BrokerUnderTest, version: int
) -> None:
    """Validate-only: a Kafka 3.9 that is not asked to validate only writes the first
    10,000 partitions of a refused request (K15)."""
    topic = created_topic(limited, "one-batch")

    fits = timed(limited, CREATE_PARTITIONS, version, grow(topic, 1 + BATCH, True))
    past = timed(limited, CREATE_PARTITIONS, version, grow(topic, 2 + BATCH, True))

    answers = [
        (int(result.error_code), result.error_message) for result in fits.results + past.results
    ]
    assert answers == [(NONE, None), (UNKNOWN_SERVER_ERROR, None)]
    assert partition_counts(limited, topic) == {topic: 1}


def refused_creation(answer: Any, version: int) -> tuple[Any, ...]:
    """(error, message) of a CreateTopics result, with (v5+) its partition count and
    replication factor."""
    refused: tuple[Any, ...] = (int(answer.error_code), answer.error_message)
    if version >= FIRST_COUNTS_V:
        refused += (answer.num_partitions, answer.replication_factor)
    return refused


def no_counts(version: int) -> tuple[int, ...]:
    return (-1, -1) if version >= FIRST_COUNTS_V else ()


@pytest.mark.parametrize("version", edges(CREATE_TOPICS))
@pytest.mark.parametrize("validate_only", [True, False], ids=["validate", "create"])
@pytest.mark.parametrize(
    ("partitions", "message"),
    [
        (LARGEST_COUNT, TOO_MANY_PARTITIONS),
        (BATCH + 1, TOO_MANY_PARTITIONS),
        (BATCH, TOO_LARGE_BATCH),  # with its topic record, one record too many
    ],
    ids=["largest", "past-the-batch", "batch-and-topic"],
)
def test_a_topic_past_one_controller_batch_is_a_policy_violation(
    limited: BrokerUnderTest, version: int, validate_only: bool, partitions: int, message: str
) -> None:
    topic = new_name("huge-topic")
    request = {**create_topic_request(topic, partitions), "validate_only": validate_only}

    [answer] = timed(limited, CREATE_TOPICS, version, request).topics

    assert refused_creation(answer, version) == (POLICY_VIOLATION, message, *no_counts(version))
    assert partition_counts(limited, topic) == {topic: None}


def test_a_topic_of_one_full_batch_is_valid(limited: BrokerUnderTest) -> None:
    """9,999 partitions, a config and the topic: 10,000 records (validated only, so that
    no broker of the suite holds that many partitions)."""
    topic = new_name("full-batch")
    fits = {
        **create_topic_request(topic, BATCH - 2, {"retention.ms": "60000"}),
        "validate_only": True,
    }
    past = create_topic_request(topic, BATCH - 1, {"retention.ms": "60000"})

    [valid] = timed(limited, CREATE_TOPICS, 7, fits).topics
    [refused] = timed(limited, CREATE_TOPICS, 7, past).topics

    assert (int(valid.error_code), valid.num_partitions) == (NONE, BATCH - 2)
    assert refused_creation(refused, 7) == (POLICY_VIOLATION, TOO_LARGE_BATCH, -1, -1)
    assert partition_counts(limited, topic) == {topic: None}


def test_a_topic_refused_on_its_own_takes_no_room_in_the_batch(limited: BrokerUnderTest) -> None:
    """An existing topic and a new one of 9,999 partitions: 10,000 partitions asked for,
    10,000 records for the one that would be created (validated only)."""
    existing, topic = created_topic(limited, "existing"), new_name("beside-existing")
    request = {
        "topics": [create_topic_request(existing)["topics"][0],
                   create_topic_request(topic, BATCH - 1)["topics"][0]],
        "timeout": 10_000,
        "validate_only": True,
    }  # fmt: skip

    refused, valid = timed(limited, CREATE_TOPICS, 7, request).topics

    assert refused_creation(refused, 7) == (
        TOPIC_ALREADY_EXISTS,
        f"Topic '{existing}' already exists.",
        -1,
        -1,
    )
    assert (int(valid.error_code), valid.num_partitions) == (NONE, BATCH - 1)


@pytest.mark.parametrize("version", edges(CREATE_TOPICS))
@pytest.mark.parametrize(
    ("topics", "message"),
    [
        (20_000, TOO_MANY_PARTITIONS),  # 20,000 partitions
        (BATCH // 2 + 1, TOO_LARGE_BATCH),  # 5,001 partitions, 10,002 records
    ],
    ids=["20000", "5001"],
)
def test_very_many_topics_in_one_request_are_all_refused(
    limited: BrokerUnderTest, version: int, topics: int, message: str
) -> None:
    prefix = new_name("many")
    names = [f"{prefix}-{index}" for index in range(topics)]
    request = {
        "topics": [create_topic_request(name)["topics"][0] for name in names],
        "timeout": 30_000,
        "validate_only": False,
    }

    answers = timed(limited, CREATE_TOPICS, version, request).topics

    assert [answer.name for answer in answers] == names
    refusals = {refused_creation(answer, version) for answer in answers}
    assert refusals == {(POLICY_VIOLATION, message, *no_counts(version))}
    assert partition_counts(limited, names[0], names[-1]) == dict.fromkeys((names[0], names[-1]))


def test_topics_of_one_full_batch_are_valid(limited: BrokerUnderTest) -> None:
    """5,000 topics of one partition: 10,000 records (validated only)."""
    prefix = new_name("full-batch-topics")
    names = [f"{prefix}-{index}" for index in range(BATCH // 2)]
    request = {
        "topics": [create_topic_request(name)["topics"][0] for name in names],
        "timeout": 30_000,
        "validate_only": True,
    }

    answers = timed(limited, CREATE_TOPICS, 7, request).topics

    assert {(int(answer.error_code), answer.num_partitions) for answer in answers} == {(NONE, 1)}
    assert [answer.name for answer in answers] == names

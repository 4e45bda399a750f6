"""Metadata v10-v12 requests naming topics by id or with a null name (KIP-516).

From v10 a Metadata request's topics carry a topic id and a nullable name, but Kafka 3.9
looks topics up by id only from v12. The same raw requests go to every broker; the
expected answers are what Apache Kafka 3.9.2 gave:

- v10 and v11: any topic id or null name makes the whole request INVALID_REQUEST, in
  Kafka's error response (no brokers, no cluster id, controller -1; every topic as asked,
  a null name as "");
- v12 with a topic id: by id alone, names ignored, each id once; unknown ids first with
  UNKNOWN_TOPIC_ID and a null name, then the topics found;
- v12 with a null name and no id: the error response with UNKNOWN_SERVER_ERROR (Kafka
  3.9 fails on it);
- a repeated name is answered once.

The connection stays open in every case (kshim used to close it).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from compat_tests.brokers import BrokerUnderTest
from compat_tests.raw_transactions import probe, wait_for_leader
from compat_tests.support import create_topic

pytestmark = [pytest.mark.wire, pytest.mark.timeout(60)]

METADATA = 3
ZERO = uuid.UUID(int=0)
UNKNOWN = uuid.UUID("5f1d3c2a-0000-4000-8000-00000000beef")
NONE, UNKNOWN_SERVER_ERROR, INVALID_REQUEST, UNKNOWN_TOPIC_ID = 0, -1, 42, 100
NOT_ASKED = -(2**31)
# (brokers listed, cluster id given, controller id known): a normal answer, or Kafka's
# error response (MetadataRequest.getErrorResponse).
ANSWERED, REFUSED = (True, True, True), (False, False, False)
Entry = tuple[str | None, str, int, bool]  # name, id label, error code, has partitions


def ask(broker: BrokerUnderTest, version: int, topics: list[dict[str, Any]]) -> Any:
    request = {
        "topics": topics,
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }
    return probe(broker).call(METADATA, version, request)


def described(broker: BrokerUnderTest, version: int, topics: list[dict[str, Any]], topic: str,
              topic_id: uuid.UUID) -> tuple[tuple[bool, bool, bool], list[Entry]]:  # fmt: skip
    """The answer, with the broker's own names and ids replaced by labels."""
    response = ask(broker, version, topics)
    labels = {ZERO: "zero", UNKNOWN: "unknown", topic_id: "topic"}
    head = (bool(response.brokers), response.cluster_id is not None, response.controller_id >= 0)
    entries = [
        (
            "topic" if answer.name == topic else answer.name,
            labels.get(answer.topic_id or ZERO, "other"),
            int(answer.error_code),
            bool(answer.partitions),
        )
        for answer in response.topics
    ]
    return head, entries


@pytest.fixture
def topic_and_id(broker: BrokerUnderTest) -> tuple[str, uuid.UUID]:
    topic = create_topic(broker, "topic-ids")
    wait_for_leader(broker, topic)
    [answer] = ask(broker, 12, [{"name": topic, "topic_id": ZERO}]).topics
    assert int(answer.error_code) == NONE and answer.topic_id not in (None, ZERO)
    return topic, answer.topic_id


def requests(topic: str, topic_id: uuid.UUID) -> dict[str, list[dict[str, Any]]]:
    return {
        "null name, unknown id": [{"name": None, "topic_id": UNKNOWN}],
        "null name, its id": [{"name": None, "topic_id": topic_id}],
        "null name, no id": [{"name": None, "topic_id": ZERO}],
        "a name and a null name": [
            {"name": topic, "topic_id": ZERO},
            {"name": None, "topic_id": UNKNOWN},
        ],
        "a name with its id": [{"name": topic, "topic_id": topic_id}],
        "a name with another id": [{"name": topic, "topic_id": UNKNOWN}],
        "its id, then an unknown one, twice": [
            {"name": None, "topic_id": topic_id},
            {"name": None, "topic_id": UNKNOWN},
            {"name": None, "topic_id": UNKNOWN},
        ],
        "a name twice": [{"name": topic, "topic_id": ZERO}, {"name": topic, "topic_id": ZERO}],
    }


@pytest.mark.parametrize("version", [10, 11])
def test_v10_and_v11_refuse_ids_and_null_names(
    broker: BrokerUnderTest, topic_and_id: tuple[str, uuid.UUID], version: int
) -> None:
    topic, topic_id = topic_and_id
    answers = {
        label: described(broker, version, topics, topic, topic_id)
        for label, topics in requests(topic, topic_id).items()
    }

    def refused(*entries: tuple[str, str]) -> tuple[tuple[bool, bool, bool], list[Entry]]:
        return REFUSED, [(name, label, INVALID_REQUEST, False) for name, label in entries]

    assert answers == {
        "null name, unknown id": refused(("", "unknown")),
        "null name, its id": refused(("", "topic")),
        "null name, no id": refused(("", "zero")),
        "a name and a null name": refused(("topic", "zero"), ("", "unknown")),
        "a name with its id": refused(("topic", "topic")),
        "a name with another id": refused(("topic", "unknown")),
        "its id, then an unknown one, twice": refused(
            ("", "topic"), ("", "unknown"), ("", "unknown")
        ),
        "a name twice": (ANSWERED, [("topic", "topic", NONE, True)]),
    }


def test_v12_looks_topics_up_by_id(
    broker: BrokerUnderTest, topic_and_id: tuple[str, uuid.UUID]
) -> None:
    topic, topic_id = topic_and_id
    answers = {
        label: described(broker, 12, topics, topic, topic_id)
        for label, topics in requests(topic, topic_id).items()
    }

    found = ("topic", "topic", NONE, True)
    unknown = (None, "unknown", UNKNOWN_TOPIC_ID, False)
    assert answers == {
        "null name, unknown id": (ANSWERED, [unknown]),
        "null name, its id": (ANSWERED, [found]),
        "null name, no id": (REFUSED, [("", "zero", UNKNOWN_SERVER_ERROR, False)]),
        "a name and a null name": (ANSWERED, [unknown]),
        "a name with its id": (ANSWERED, [found]),
        "a name with another id": (ANSWERED, [unknown]),
        "its id, then an unknown one, twice": (ANSWERED, [unknown, found]),
        "a name twice": (ANSWERED, [found]),
    }

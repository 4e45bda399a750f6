"""CreateTopics of 1,000 topics in one request and DeleteTopics of 1,000 in one request,
against a real broker, then what Metadata says and what a restart finds.

The requests are raw (kshim.client.wire): client libraries split such batches
themselves, and the point is one request of each, about 20 KB of topic names.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kshim.client.wire import connect
from kshim.protocol.errors import ErrorCode
from kshim.testing import BrokerProcess, failure_lines

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

TOPIC_COUNT = 1_000
CREATE_TOPICS, DELETE_TOPICS, METADATA = 19, 20, 3
TIMEOUT_S = 120


def create_all(bootstrap: str, names: list[str]) -> list[tuple[str, int]]:
    """(name, error code) of each topic of one CreateTopics v4 request."""
    topics = [
        {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [],
         "configs": []}
        for name in names
    ]  # fmt: skip
    request = {"topics": topics, "timeout": TIMEOUT_S * 1000, "validate_only": False}
    with connect(bootstrap, timeout_s=TIMEOUT_S) as connection:
        answer = connection.call(CREATE_TOPICS, 4, request)
    return [(str(topic.name), int(topic.error_code)) for topic in answer.topics]


def delete_all(bootstrap: str, names: list[str]) -> list[tuple[str, int]]:
    """(name, error code) of each topic of one DeleteTopics v4 request."""
    request = {"topic_names": names, "timeout": TIMEOUT_S * 1000}
    with connect(bootstrap, timeout_s=TIMEOUT_S) as connection:
        answer = connection.call(DELETE_TOPICS, 4, request)
    return [(str(topic.name), int(topic.error_code)) for topic in answer.responses]


def listed_topics(bootstrap: str) -> set[str]:
    """Every topic an all-topics Metadata v12 request lists."""
    request = {"topics": None, "allow_auto_topic_creation": False,
               "include_topic_authorized_operations": False}  # fmt: skip
    with connect(bootstrap, timeout_s=TIMEOUT_S) as connection:
        answer = connection.call(METADATA, 12, request)
    return {str(topic.name) for topic in answer.topics}


def test_a_thousand_topics_created_and_deleted_in_one_request_each(tmp_path: Path) -> None:
    names = [f"admin-scale-{index:04d}" for index in range(TOPIC_COUNT)]
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        assert create_all(broker.bootstrap, names) == [(name, ErrorCode.none) for name in names]
        assert set(names) <= listed_topics(broker.bootstrap)
        again = create_all(broker.bootstrap, names[:3])
        assert again == [(name, ErrorCode.topic_already_exists) for name in names[:3]]

        broker.stop()  # the topics are durable: a restart lists them all
        broker.start()
        assert set(names) <= listed_topics(broker.bootstrap)

        kept, deleted = names[:10], names[10:]
        assert delete_all(broker.bootstrap, deleted) == [(name, ErrorCode.none) for name in deleted]
        remaining = listed_topics(broker.bootstrap)
        assert set(kept) <= remaining and not set(deleted) & remaining
        broker.stop()
        broker.start()  # and the deletions too
        remaining = listed_topics(broker.bootstrap)
        assert set(kept) <= remaining and not set(deleted) & remaining
    finally:
        broker.stop()
    assert not failure_lines(broker.log_text())

"""Fetch sessions (KIP-227) behind the READ check: as in Kafka's handleFetchRequest, an
incremental fetch authorises every partition of its session, not only those it names, and
a refused partition still belongs to the session."""

from __future__ import annotations

from typing import Any

from kshim.broker.broker import Broker
from kshim.protocol.acls import Operation, Permission
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from tests.broker.access.support import OTHER, TOPIC, call, grant_cluster, grant_topic

FETCH, FETCH_VERSION = 1, 12
TAF = ErrorCode.topic_authorization_failed
NO_SESSION, INITIAL = 0, 0


def request(session_id: int, epoch: int, *topics: str, replica_id: int = -1) -> FetchRequest:
    wanted = [FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)]
    return FetchRequest(
        replica_id=replica_id,
        max_bytes=1 << 20,
        session_id=session_id,
        session_epoch=epoch,
        topics=[FetchTopic(topic=name, partitions=list(wanted)) for name in topics],
    )


async def fetch(broker: Broker, fetch_request: FetchRequest) -> tuple[Any, dict[str, int]]:
    answer = await call(broker, FETCH, FETCH_VERSION, fetch_request)
    errors = {topic.topic: int(topic.partitions[0].error_code) for topic in answer.responses}
    return answer, errors


async def test_an_incremental_fetch_checks_read_on_every_partition_of_its_session(
    broker: Broker,
) -> None:
    grant_topic(broker, TOPIC, Operation.READ)
    grant_topic(broker, OTHER, Operation.READ)
    opened, opened_errors = await fetch(broker, request(NO_SESSION, INITIAL, TOPIC, OTHER))
    grant_topic(broker, OTHER, Operation.READ, permission=Permission.DENY)

    _, errors = await fetch(broker, request(opened.session_id, 1))

    assert opened.session_id != NO_SESSION
    assert opened_errors == {TOPIC: 0, OTHER: 0}
    # Only the partition whose answer changed, to an error, is in the incremental answer.
    assert errors == {OTHER: TAF}


async def test_a_refused_partition_joins_the_session_and_is_answered_every_time(
    broker: Broker,
) -> None:
    grant_topic(broker, TOPIC, Operation.READ)
    opened, opened_errors = await fetch(broker, request(NO_SESSION, INITIAL, TOPIC, OTHER))
    _, refused = await fetch(broker, request(opened.session_id, 1))
    grant_topic(broker, OTHER, Operation.READ)

    _, allowed = await fetch(broker, request(opened.session_id, 2))

    assert opened_errors == {TOPIC: 0, OTHER: TAF}
    assert refused == {OTHER: TAF}
    assert allowed == {OTHER: 0}  # its offsets, told for the first time


async def test_a_follower_without_cluster_action_still_gets_a_session(broker: Broker) -> None:
    """Kafka opens the session before authorising: every partition is refused in it."""
    opened, errors = await fetch(broker, request(NO_SESSION, INITIAL, TOPIC, replica_id=0))
    grant_cluster(broker, Operation.CLUSTER_ACTION)
    _, allowed = await fetch(broker, request(opened.session_id, 1, replica_id=0))

    assert (opened.session_id != NO_SESSION, errors) == (True, {TOPIC: TAF})
    assert allowed == {TOPIC: 0}

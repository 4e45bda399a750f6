"""``kshim groups``' wire query: what a running broker says of its groups' consumption, as any
client sees it (the broker's consumption_status turns it into rows with lag).

Requests go through kshim's own blocking client (``kshim.client.wire``), so the command
needs no client library: ListGroups v4 (unless one group is named), DescribeGroups v5
(members, and their consumer-protocol assignments), OffsetFetch v7 with null topics
(everything the group committed) and ListOffsets v5 for the latest offsets (the high
watermark). All requests go to the bootstrap broker, which coordinates every group in
kshim. Every socket operation has a timeout.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kio.schema.describe_groups.v5.response import DescribeGroupsResponse
from kio.schema.list_groups.v4.response import ListGroupsResponse
from kio.schema.list_offsets.v5.response import ListOffsetsResponse
from kio.schema.offset_fetch.v7.response import OffsetFetchResponse

from kshim.client.errors import broken_off
from kshim.client.frames import MalformedResponseError
from kshim.client.security import ClientSecurity
from kshim.client.wire import ConnectionClosedError, WireConnection, connect
from kshim.protocol.consumer_protocol import assigned_partitions

CLIENT_ID = "kshim-groups"
LIST_OFFSETS_KEY, OFFSET_FETCH_KEY, DESCRIBE_GROUPS_KEY, LIST_GROUPS_KEY = 2, 9, 15, 16
LATEST = -1
DEAD = "Dead"
TopicPartition = tuple[str, int]  # (topic, partition)


class QueryError(Exception):
    """The broker refused a request, answered with an error code, or broke the protocol."""


class GroupNotFound(QueryError):
    """The group named does not exist: no members and no committed offsets."""


@dataclass(frozen=True, slots=True)
class GroupOffsets:
    """What the broker says of one group: its member count, the partitions assigned to its
    members, its committed offsets, and the log end offset of each of those partitions
    that exists."""

    group_id: str
    members: int
    assigned: list[TopicPartition]
    committed: dict[TopicPartition, int]
    log_ends: dict[TopicPartition, int]


def query_groups(
    bootstrap: str,
    group_id: str | None = None,
    timeout_s: float = 10.0,
    *,
    security: ClientSecurity | None = None,
) -> list[GroupOffsets]:
    """The offsets of one group, or of every group, from the broker at ``bootstrap``,
    connected to as ``security`` says (None: PLAINTEXT).

    Raises ValueError for a bootstrap that is not host:port, OSError when the broker
    cannot be reached or does not answer in time, AuthenticationFailed when it refuses the
    SASL credentials, GroupNotFound when ``group_id`` names no group, QueryError on an
    error answer or when the broker closes the connection or answers something malformed.
    """
    try:
        with connect(bootstrap, timeout_s, client_id=CLIENT_ID, security=security) as connection:
            group_ids = [group_id] if group_id else _list_groups(connection)
            members = _describe_groups(connection, group_ids)
            group_ids = [name for name in group_ids if name in members]
            if group_id and not group_ids:
                # DescribeGroups before v6 answers an unknown group with no error and state
                # Dead; Kafka's kafka-consumer-groups.sh then reports "Consumer group '...'
                # does not exist." rather than an empty table.
                raise GroupNotFound(f"consumer group {group_id} does not exist")
            committed = {name: _committed(connection, name) for name in group_ids}
            wanted = {tp for name in group_ids for tp in [*committed[name], *members[name][1]]}
            log_ends = _log_ends(connection, wanted)
    except (ConnectionClosedError, MalformedResponseError) as error:
        raise QueryError(broken_off(bootstrap, "query", error, security)) from error
    return [
        GroupOffsets(name, members[name][0], members[name][1], committed[name], log_ends)
        for name in group_ids
    ]


def _list_groups(connection: WireConnection) -> list[str]:
    response = connection.call_for(ListGroupsResponse, LIST_GROUPS_KEY, 4, {"states_filter": []})
    _check(response.error_code, "ListGroups")
    return sorted(str(group.group_id) for group in response.groups)


def _describe_groups(
    connection: WireConnection, group_ids: list[str]
) -> dict[str, tuple[int, list[TopicPartition]]]:
    """Per group: the member count and the partitions assigned to its members; groups
    described as Dead (unknown, or just deleted) are left out."""
    if not group_ids:
        return {}
    response = connection.call_for(
        DescribeGroupsResponse, DESCRIBE_GROUPS_KEY, 5, {"groups": group_ids}
    )
    described: dict[str, tuple[int, list[TopicPartition]]] = {}
    for group in response.groups:
        _check(group.error_code, f"DescribeGroups {group.group_id}")
        if group.group_state == DEAD:
            continue  # gone, or never there
        assigned = [
            (topic, partition)
            for member in group.members
            for topic, partition in assigned_partitions(bytes(member.member_assignment)) or ()
        ]
        described[str(group.group_id)] = (len(group.members), assigned)
    return described


def _committed(connection: WireConnection, group_id: str) -> dict[TopicPartition, int]:
    response = connection.call_for(
        OffsetFetchResponse, OFFSET_FETCH_KEY, 7, {"group_id": group_id, "topics": None}
    )
    _check(response.error_code, f"OffsetFetch {group_id}")
    return {
        (str(topic.name), int(partition.partition_index)): int(partition.committed_offset)
        for topic in response.topics
        for partition in topic.partitions
        if partition.committed_offset >= 0
    }


def _log_ends(
    connection: WireConnection, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, int]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    if not by_topic:
        return {}
    topics = [
        {
            "name": topic,
            "partitions": [
                {"partition_index": index, "current_leader_epoch": -1, "timestamp": LATEST}
                for index in indexes
            ],
        }
        for topic, indexes in by_topic.items()
    ]
    request = {"replica_id": -1, "isolation_level": 0, "topics": topics}
    response = connection.call_for(ListOffsetsResponse, LIST_OFFSETS_KEY, 5, request)
    return {
        (str(topic.name), int(partition.partition_index)): int(partition.offset)
        for topic in response.topics
        for partition in topic.partitions
        if partition.error_code == 0
    }


def _check(error_code: int, what: str) -> None:
    """Raises QueryError unless ``error_code`` (kio's ErrorCode, an int) is NONE."""
    if error_code != 0:
        raise QueryError(f"{what} failed: {error_code!r}")

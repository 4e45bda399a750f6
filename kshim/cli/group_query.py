"""``kshim groups``' wire query: consumption status from a running broker, as any client sees it.

A small blocking Kafka client on kshim's own codecs (kio), so the command
needs no client library: ListGroups v4 (unless one group is named),
DescribeGroups v5 (members, and their consumer-protocol assignments),
OffsetFetch v7 with null topics (everything the group committed) and
ListOffsets v5 for the latest offsets (the high watermark). All requests go to
the bootstrap broker, which coordinates every group in kshim. Every socket
operation has a timeout.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any

from kio.serial import entity_reader

from kshim.broker.groups.consumption_status import PartitionStatus, group_status
from kshim.protocol import codec
from kshim.protocol.consumer_protocol import assigned_partitions
from kshim.protocol.primitives import read_tagged_fields
from kshim.storage.interface import TopicPartition

CLIENT_ID = "kshim-groups"
LIST_OFFSETS_KEY, OFFSET_FETCH_KEY, DESCRIBE_GROUPS_KEY, LIST_GROUPS_KEY = 2, 9, 15, 16
LATEST = -1
_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhih")


class QueryError(Exception):
    """The broker refused a request or answered with an error code."""


class BrokerConnection:
    """One blocking connection; ``request`` sends a message and returns kio's decoded answer."""

    def __init__(self, host: str, port: int, timeout_s: float) -> None:
        self._socket = socket.create_connection((host, port), timeout=timeout_s)
        self._correlation_id = 0

    def __enter__(self) -> BrokerConnection:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._socket.close()

    def request(self, api_key: int, version: int, fields: Mapping[str, Any]) -> Any:
        """Sends one request and returns the decoded response body."""
        self._correlation_id += 1
        flexible = codec.is_flexible(api_key, version)
        client_id = CLIENT_ID.encode()
        header = _HEADER.pack(api_key, version, self._correlation_id, len(client_id)) + client_id
        request_class = codec.request_class(api_key, version)
        body = codec.encode_entity(
            request_class, codec.build(request_class, fields, any_version=True)
        )
        payload = header + (b"\x00" if flexible else b"") + body
        self._socket.sendall(_SIZE.pack(len(payload)) + payload)
        frame = self._receive(_SIZE.unpack(self._receive(_SIZE.size))[0])
        position = _SIZE.size  # the correlation id
        if flexible:
            position = read_tagged_fields(frame, position)
        response_class = codec.response_class(api_key, version)
        response, _ = entity_reader(response_class)(memoryview(frame)[position:], 0)
        return response

    def _receive(self, size: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < size:
            chunk = self._socket.recv(size - len(chunks))
            if not chunk:
                raise QueryError("the broker closed the connection")
            chunks += chunk
        return bytes(chunks)


def parse_bootstrap(bootstrap: str) -> tuple[str, int]:
    """``host:port`` (the first of a comma-separated list); raises ValueError."""
    host, _, port = bootstrap.split(",", maxsplit=1)[0].strip().rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"{bootstrap!r} is not host:port")
    return host.strip("[]"), int(port)


def query_status(
    bootstrap: str, group_id: str | None = None, timeout_s: float = 10.0
) -> list[PartitionStatus]:
    """Consumption status of one group, or of every group, from the broker at ``bootstrap``.

    Raises OSError when the broker cannot be reached, QueryError on an error answer.
    """
    host, port = parse_bootstrap(bootstrap)
    with BrokerConnection(host, port, timeout_s) as connection:
        group_ids = [group_id] if group_id else _list_groups(connection)
        members = _describe_groups(connection, group_ids)
        committed = {name: _committed(connection, name) for name in group_ids}
        wanted = {tp for name in group_ids for tp in [*committed[name], *members[name][1]]}
        log_ends = _log_ends(connection, wanted)
    rows: list[PartitionStatus] = []
    for name in group_ids:
        count, assigned = members[name]
        rows += group_status(name, committed[name], log_ends, assigned, count)
    return rows


def _list_groups(connection: BrokerConnection) -> list[str]:
    response = connection.request(LIST_GROUPS_KEY, 4, {"states_filter": []})
    _check(response.error_code, "ListGroups")
    return sorted(str(group.group_id) for group in response.groups)


def _describe_groups(
    connection: BrokerConnection, group_ids: list[str]
) -> dict[str, tuple[int, list[TopicPartition]]]:
    """Per group: the member count and the partitions assigned to its members."""
    if not group_ids:
        return {}
    response = connection.request(DESCRIBE_GROUPS_KEY, 5, {"groups": group_ids})
    described: dict[str, tuple[int, list[TopicPartition]]] = {}
    for group in response.groups:
        _check(group.error_code, f"DescribeGroups {group.group_id}")
        assigned = [
            TopicPartition(topic, partition)
            for member in group.members
            for topic, partition in assigned_partitions(bytes(member.member_assignment)) or ()
        ]
        described[str(group.group_id)] = (len(group.members), assigned)
    return described


def _committed(connection: BrokerConnection, group_id: str) -> dict[TopicPartition, int]:
    response = connection.request(OFFSET_FETCH_KEY, 7, {"group_id": group_id, "topics": None})
    _check(response.error_code, f"OffsetFetch {group_id}")
    return {
        TopicPartition(str(topic.name), int(partition.partition_index)): int(
            partition.committed_offset
        )
        for topic in response.topics
        for partition in topic.partitions
        if partition.committed_offset >= 0
    }


def _log_ends(
    connection: BrokerConnection, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, int]:
    by_topic: dict[str, list[int]] = {}
    for topic_partition in sorted(partitions):
        by_topic.setdefault(topic_partition.topic, []).append(topic_partition.partition)
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
    response = connection.request(LIST_OFFSETS_KEY, 5, request)
    return {
        TopicPartition(str(topic.name), int(partition.partition_index)): int(partition.offset)
        for topic in response.topics
        for partition in topic.partitions
        if partition.error_code == 0
    }


def _check(error_code: Any, what: str) -> None:
    if int(error_code.value if hasattr(error_code, "value") else error_code) != 0:
        raise QueryError(f"{what} failed: {error_code!r}")

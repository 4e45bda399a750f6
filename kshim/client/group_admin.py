"""``kshim groups reset-offsets`` and ``kshim groups delete``: their wire requests.

Requests go through kshim's own blocking client (``kshim.client.wire``), so the commands
need no client library and work against any Kafka broker. Each request is sent at a version
that kshim and Apache Kafka 3.x and 4.x all serve (Kafka 4.0 dropped the oldest ones,
KIP-896): Metadata v11, DescribeGroups v5, OffsetFetch v7, ListOffsets v5, OffsetCommit v8
and DeleteGroups v2. Everything goes to the bootstrap broker: kshim coordinates every group
itself, and a Kafka cluster of one broker does too (FindCoordinator is not asked). Every
socket operation has a timeout; a connection is used by one thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from kio.schema.delete_groups.v2.response import DeleteGroupsResponse
from kio.schema.describe_groups.v5.response import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsResponse,
)
from kio.schema.list_groups.v4.response import ListGroupsResponse
from kio.schema.metadata.v11.response import MetadataResponse
from kio.schema.offset_commit.v8.response import OffsetCommitResponse
from kio.schema.offset_fetch.v7.response import OffsetFetchResponse

from kshim.client.admin_connection import BootstrapAdmin
from kshim.client.errors import error_name
from kshim.client.list_offsets import NO_LEADER_EPOCH, READ_UNCOMMITTED, list_offsets
from kshim.client.request_versions import (
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    LIST_GROUPS,
    METADATA,
    OFFSET_COMMIT,
    OFFSET_FETCH,
)
from kshim.protocol.consumer_protocol import assigned_partitions

# The admin client's commit (AdminClient.alterConsumerGroupOffsets): no generation, no
# member; a coordinator takes it only while the group is Empty or unknown
# (GroupCoordinator.validateOffsetCommit).
ADMIN_GENERATION = -1
ADMIN_MEMBER_ID = ""
DEAD = "Dead"  # DescribeGroups' state of a group that does not exist


class _PartitionAnswer(Protocol):
    """A partition of an answer by topic and partition (OffsetFetch, ListOffsets,
    OffsetCommit): each has its number, and fields of its own."""

    @property
    def partition_index(self) -> int: ...


_Partition_co = TypeVar("_Partition_co", bound=_PartitionAnswer, covariant=True)
_Partition = TypeVar("_Partition", bound=_PartitionAnswer)


class _TopicAnswer(Protocol[_Partition_co]):
    @property
    def partitions(self) -> tuple[_Partition_co, ...]: ...


class GroupAdminError(Exception):
    """The broker answered with an error code, closed the connection, or broke the protocol."""


@dataclass(frozen=True, slots=True)
class GroupDescription:
    """What DescribeGroups says of a group: its state as Kafka names it (``Dead`` for one
    that does not exist) and how many members it has."""

    group: str
    state: str
    members: int


@dataclass(frozen=True, slots=True)
class GroupMember:
    """One member of a group as DescribeGroups says it: its ids, where it connects from,
    and the partitions its consumer-protocol assignment gives it (topic, partition)."""

    group: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: tuple[tuple[str, int], ...]


class GroupAdmin(BootstrapAdmin):
    """The group requests, over one connection; each raises GroupAdminError on an error
    answer. Offsets are of one topic at a time, by partition."""

    client_id = "kshim-groups"
    error = GroupAdminError

    def describe(self, group: str) -> GroupDescription:
        response = self._call(DescribeGroupsResponse, DESCRIBE_GROUPS, {"groups": [group]})
        [described] = response.groups
        self._check(described.error_code, f"cannot describe group {group}")
        return GroupDescription(group, str(described.group_state), len(described.members))

    def list_groups(self) -> list[str]:
        """Every group's id, sorted."""
        response = self._call(ListGroupsResponse, LIST_GROUPS, {"states_filter": []})
        self._check(response.error_code, "cannot list groups")
        return sorted(str(group.group_id) for group in response.groups)

    def members(self, groups: Sequence[str]) -> dict[str, list[GroupMember]]:
        """The members of each group that exists (DescribeGroups answers an unknown one as
        ``Dead``, which is left out), in the order the coordinator lists them."""
        described: dict[str, list[GroupMember]] = {}
        response = self._call(DescribeGroupsResponse, DESCRIBE_GROUPS, {"groups": list(groups)})
        for group in response.groups:
            self._check(group.error_code, f"cannot describe group {group.group_id}")
            if group.group_state != DEAD:
                members = [_member(group, member) for member in group.members]
                described[str(group.group_id)] = members
        return described

    def partitions(self, topic: str) -> list[int]:
        """The topic's partition numbers, in order; raises GroupAdminError for a topic
        that does not exist (it is never created: auto-creation is refused)."""
        request = {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
        [described] = self._call(MetadataResponse, METADATA, request).topics
        self._check(described.error_code, f"cannot describe topic {topic}")
        return sorted(int(partition.partition_index) for partition in described.partitions)

    def committed(self, group: str, topic: str, partitions: Sequence[int]) -> dict[int, int]:
        """The group's committed offset of each partition that has one."""
        topics = [{"name": topic, "partition_indexes": list(partitions)}]
        request = {"group_id": group, "topics": topics}
        response = self._call(OffsetFetchResponse, OFFSET_FETCH, request)
        self._check(response.error_code, f"cannot fetch the offsets of group {group}")
        committed = {}
        for index, partition in _answered_partitions(response.topics):
            self._check(
                partition.error_code, f"cannot fetch the offset of group {group} on {topic}-{index}"
            )
            if partition.committed_offset >= 0:  # -1: nothing committed
                committed[index] = int(partition.committed_offset)
        return committed

    def log_offsets(self, topic: str, partitions: Sequence[int], timestamp: int) -> dict[int, int]:
        """ListOffsets of each partition: EARLIEST (the log start), LATEST (the high
        watermark, as Kafka's admin tools read it: read_uncommitted) or the first offset
        whose timestamp is at or after ``timestamp`` (UNKNOWN_OFFSET when there is none)."""
        return list_offsets(
            self._connection, self.error, topic, partitions, timestamp, READ_UNCOMMITTED
        )

    def commit(self, group: str, topic: str, offsets: Mapping[int, int]) -> None:
        """Commits ``offsets`` for the group as the admin client does (no generation, no
        member), all or none of them: a coordinator refuses such a commit while the group
        has members (UNKNOWN_MEMBER_ID)."""
        partitions = [
            {
                "partition_index": index,
                "committed_offset": offset,
                "committed_leader_epoch": NO_LEADER_EPOCH,
                "committed_metadata": "",
            }
            for index, offset in sorted(offsets.items())
        ]
        request = {
            "group_id": group,
            "generation_id_or_member_epoch": ADMIN_GENERATION,
            "member_id": ADMIN_MEMBER_ID,
            "group_instance_id": None,
            "topics": [{"name": topic, "partitions": partitions}],
        }
        response = self._call(OffsetCommitResponse, OFFSET_COMMIT, request)
        for index, partition in _answered_partitions(response.topics):
            self._check(
                partition.error_code, f"cannot commit offsets of group {group} on {topic}-{index}"
            )

    def delete_groups(self, groups: Sequence[str]) -> dict[str, str | None]:
        """Deletes the groups in one request; returns, per group, None once deleted or
        Kafka's name of the error that kept it (NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND)."""
        request = {"groups_names": list(dict.fromkeys(groups))}
        response = self._call(DeleteGroupsResponse, DELETE_GROUPS, request)
        return {
            str(result.group_id): None if result.error_code == 0 else error_name(result.error_code)
            for result in response.results
        }


# ``kshim groups``' admin on the bootstrap broker (BootstrapAdmin.connected).
group_admin = GroupAdmin.connected


def _member(group: DescribedGroup, member: DescribedGroupMember) -> GroupMember:
    """A DescribeGroups member; an assignment that is not the consumer protocol's (a
    Connect worker's, say) counts as no partitions."""
    assigned = assigned_partitions(bytes(member.member_assignment)) or ()
    return GroupMember(
        group=str(group.group_id),
        member_id=str(member.member_id),
        group_instance_id=member.group_instance_id,
        client_id=str(member.client_id),
        client_host=str(member.client_host),
        assignment=tuple(sorted((str(topic), int(index)) for topic, index in assigned)),
    )


def _answered_partitions(
    topics: Iterable[_TopicAnswer[_Partition]],
) -> Iterator[tuple[int, _Partition]]:
    """(partition number, answer) of every partition of a one-topic response."""
    for topic in topics:
        for partition in topic.partitions:
            yield int(partition.partition_index), partition

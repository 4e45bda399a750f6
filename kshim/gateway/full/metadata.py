"""Sans-io: a Metadata answer's full-data views as a gateway serving them answers them.

Each partition of ``T.full`` is led by the gateway owning it (ownership.py): the answer
names that gateway as the partition's leader, its only replica and in-sync replica, and
adds it to the brokers, so a client sends its reads of the partition there (the placeholder
topic's own leaders hold nothing). A partition no gateway owns yet is answered
LEADER_NOT_AVAILABLE, which clients retry. The leader epoch is given as unknown (-1): a
view has no epochs, and a client then skips the epoch checks of KIP-320 rather than ask a
gateway for them. An answer to a request for every topic leaves the views out, as kshim's
broker does (docs/full-data-view.md: named, not listed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import cast

from kshim.broker.full_view.naming import source_name
from kshim.client.list_offsets import NO_LEADER_EPOCH
from kshim.gateway.full.shapes import MetadataAnswer, MetadataTopic, replaced
from kshim.protocol.errors import ErrorCode

# (view topic, partition) -> the owning gateway as (node id, host, port), or None.
OwnerOf = Callable[[str, int], tuple[int, str, int] | None]


def views_in_metadata(
    owner_of: OwnerOf, every_owner: Callable[[], Iterable[tuple[int, str, int]]]
) -> Callable[[object, bool], object]:
    """The rewriting of a decoded Metadata answer (kio's, of any version), ``lists_all``
    saying whether it answers a request for every topic. ``every_owner``: the gateways
    owning any view, named in every answer's brokers: Kafka's admin client finds a
    partition's leader in the brokers of an answer for no topic (its ListOffsets waits
    for the leader's node to appear there), not in the answer naming the partition."""

    def rewrite(decoded: object, lists_all: bool) -> object:
        answer = cast(MetadataAnswer, decoded)
        topics: list[MetadataTopic] = []
        owners = {owner[0]: owner for owner in every_owner()}
        for topic in answer.topics:
            if topic.name is None or source_name(topic.name) is None:
                topics.append(topic)
            elif not lists_all:
                topics.append(_led_by_owners(topic, owner_of, owners))
        brokers = (*answer.brokers, *_brokers(answer, owners))
        return replaced(answer, {"topics": tuple(topics), "brokers": brokers})

    return rewrite


def _led_by_owners(
    topic: MetadataTopic, owner_of: OwnerOf, owners: dict[int, tuple[int, str, int]]
) -> MetadataTopic:
    if topic.error_code != ErrorCode.none or topic.name is None:
        return topic
    partitions = []
    for partition in topic.partitions:
        owner = owner_of(topic.name, partition.partition_index)
        changes: dict[str, object]
        if owner is None:
            changes = {"error_code": ErrorCode.leader_not_available, "leader_id": -1}
            nodes: tuple[int, ...] = ()
        else:
            owners[owner[0]] = owner
            changes = {"error_code": ErrorCode.none, "leader_id": owner[0]}
            nodes = (owner[0],)
        changes |= {"leader_epoch": NO_LEADER_EPOCH, "replica_nodes": nodes, "isr_nodes": nodes}
        changes |= {"offline_replicas": ()}
        partitions.append(replaced(partition, changes))
    return replaced(topic, {"partitions": tuple(partitions)})


def _brokers(answer: MetadataAnswer, owners: dict[int, tuple[int, str, int]]) -> tuple[object, ...]:
    """The owning gateways the answer does not name yet, as entries of its brokers."""
    named = {broker.node_id for broker in answer.brokers}
    if not answer.brokers:
        return ()
    template = answer.brokers[0]
    return tuple(
        replaced(template, {"node_id": node_id, "host": host, "port": port, "rack": None})
        for node_id, host, port in owners.values()
        if node_id not in named
    )

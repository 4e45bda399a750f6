"""Each topic's Metadata entry, encoded once per response version and kept while the topic
stays as it is.

Metadata for all topics lists every stored topic (views are answered only when named:
api/records/metadata.py), and clients ask for it again and again (librdkafka refreshes what
it knows every ``topic.metadata.refresh.interval.ms``, and sooner after errors and new
topics; every pattern subscription asks for all topics): at 10,000 topics (20,000
entries while views were listed too), describing and encoding them took most of a second
each time.
An entry says a topic's name, id and partitions, each led by this broker; it changes only
when the topic is created, deleted or given partitions, and each of those gives the
stored topic a new ``TopicRecord`` (topics.py replaces the frozen record on every change,
never alters it). So an entry is kept with the record object it was written from and the
kind of topic (a topic, or its view), and stays good while the name resolves to that same
record and kind: no invalidation calls, and a deleted topic recreated under its name is a
new record.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kshim.broker.topic_resolver import ResolvedTopic, TopicKind, TopicResolver
from kshim.broker.topics import TopicManager
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.metadata import MetadataResponsePartition, MetadataResponseTopic
from kshim.protocol.metadata_response import encode_topic
from kshim.storage.meta.metadata import TopicRecord

# Every current name is a stored topic or its view (kept once asked for by name): at most
# two per stored topic. A table holding more than that plus this many is swept (every
# kept name resolved again, the entries of names that went away dropped), so sweeps come
# at most once per this many new names.
STALE_ALLOWANCE = 1_024
NAMES_PER_STORED_TOPIC = 2


def describe(topic: ResolvedTopic, node_id: int) -> MetadataResponseTopic:
    """``topic``'s Metadata entry: a single broker (``node_id``) leads every partition and
    is its only replica."""
    return MetadataResponseTopic(
        error_code=ErrorCode.none,
        name=topic.name,
        topic_id=topic.topic_id,
        # Views too: Spark's source drops internal topics even when named; views are kept
        # from pattern subscriptions by being left out of all-topics answers instead.
        is_internal=False,
        partitions=[
            MetadataResponsePartition(
                error_code=ErrorCode.none,
                partition_index=index,
                leader_id=node_id,
                leader_epoch=0,
                replica_nodes=[node_id],
                isr_nodes=[node_id],
                offline_replicas=[],
            )
            for index in range(topic.partition_count)
        ],
    )


@dataclass(frozen=True, slots=True)
class _Kept:
    record: TopicRecord  # the stored topic's record the entry was written from
    kind: TopicKind
    node_id: int
    entry: bytes  # encode_topic's bytes

    def describes(self, topic: ResolvedTopic, node_id: int) -> bool:
        return (
            self.record is topic.stored.record
            and self.kind is topic.kind
            and self.node_id == node_id
        )


class TopicDescriptions:
    """Encoded Metadata entries by response version and topic name; event-loop thread
    only."""

    def __init__(self, resolver: TopicResolver, topics: TopicManager) -> None:
        self._resolver = resolver
        self._topics = topics  # only counted: how many kept names can be current
        self._by_version: dict[int, dict[str, _Kept]] = {}

    def entries(self, topics: Iterable[ResolvedTopic], node_id: int, version: int) -> list[bytes]:
        """Each topic's entry in Metadata ``version``'s answer (``encode_topic``'s bytes),
        in order, with ``node_id`` leading the partitions; encoded on first use and kept.

        The loop is the all-topics answer's: 10,000 entries at 10,000 topics, so the
        check of a kept entry is written out here rather than called.
        """
        kept_by_name = self._by_version.setdefault(version, {})
        found = []
        for topic in topics:
            kept = kept_by_name.get(topic.name)
            if (
                kept is None
                or kept.record is not topic.stored.record
                or kept.kind is not topic.kind
                or kept.node_id != node_id
            ):
                kept = self._keep(kept_by_name, topic, node_id, version)
            found.append(kept.entry)
        return found

    def encoded(self, topic: ResolvedTopic, node_id: int, version: int) -> bytes:
        """One topic's entry, as ``entries`` gives it."""
        return self.entries((topic,), node_id, version)[0]

    def __len__(self) -> int:
        """How many entries are kept, over every version."""
        return sum(len(kept_by_name) for kept_by_name in self._by_version.values())

    def _keep(
        self, kept_by_name: dict[str, _Kept], topic: ResolvedTopic, node_id: int, version: int
    ) -> _Kept:
        entry = encode_topic(version, describe(topic, node_id))
        kept = kept_by_name[topic.name] = _Kept(topic.stored.record, topic.kind, node_id, entry)
        current_at_most = NAMES_PER_STORED_TOPIC * len(self._topics.by_name)
        if len(kept_by_name) > current_at_most + STALE_ALLOWANCE:
            self._sweep()
        return kept

    def _sweep(self) -> None:
        """Drops the entries of names that no longer resolve to the topic they describe (in
        place: ``entries`` may be filling one of the tables)."""
        for kept_by_name in self._by_version.values():
            stale = [
                name for name, kept in kept_by_name.items() if not self._still_describes(name, kept)
            ]
            for name in stale:
                del kept_by_name[name]

    def _still_describes(self, name: str, kept: _Kept) -> bool:
        resolved = self._resolver.resolve(name)
        return resolved is not None and kept.describes(resolved, kept.node_id)

"""The access rules of the APIs that write, read and describe topics' records: Produce,
Fetch, ListOffsets and Metadata (KafkaApis.handleProduceRequest, handleFetchRequest,
handleListOffsetRequest, handleTopicMetadataRequest; DeleteRecords' is in
delete_records_access.py, loaded with its route).

Refused partitions are answered in the same response as the others, after them, as
Kafka merges its answers. Each rule splits the request into what the client may do and
what it may not, has the handler's steps answer the allowed part, and adds the refused
part's errors before the response is encoded (Produce and Metadata encode their answers
by hand: produce.py, metadata.py). Fetch is split after its session is updated: an
incremental fetch reads partitions its request does not name (its session's, KIP-227),
and its refused partitions are answered among the unknown ones, in the session's order,
as Kafka's ``erroneous`` are.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Collection, Iterable

from kshim.api.access.permissions import Permissions
from kshim.api.access.refusals import (
    Listing,
    item_by_item,
    partition_by_partition,
    topics_need,
)
from kshim.api.access.rule import Handler
from kshim.api.context import RequestContext
from kshim.api.records import fetch, metadata, produce
from kshim.broker.fetch_sessions import Answered, Wanted
from kshim.broker.topic_resolver import NO_TOPIC_ID
from kshim.protocol.acls import CLUSTER_NAME, Operation, ResourceType
from kshim.protocol.errors import ErrorCode
from kshim.protocol.fetch_response import Part
from kshim.protocol.messages.fetch import FetchRequest
from kshim.protocol.messages.list_offsets import (
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from kshim.protocol.messages.metadata import MetadataResponseTopic
from kshim.protocol.metadata_request import MetadataRequest
from kshim.protocol.metadata_response import encode_topic
from kshim.protocol.produce_request import ProduceRequest, TopicData
from kshim.protocol.produce_response import PartitionAnswer, TopicAnswers
from kshim.protocol.record_batch import ATTRIBUTES_OFFSET, TRANSACTIONAL_FLAG_MASK

NO_OFFSET = -1  # base offset, high watermark, log start: Kafka's -1 for "none"
_ATTRIBUTES = struct.Struct(">h")


async def produce_rule(
    request: ProduceRequest,
    context: RequestContext,
    permissions: Permissions,
    handle: Handler[ProduceRequest, list[Part] | None],
) -> list[Part] | None:
    """Transactional records need WRITE on the request's transactional id, or every
    partition is TRANSACTIONAL_ID_AUTHORIZATION_FAILED; then each topic needs WRITE, or its
    partitions are TOPIC_AUTHORIZATION_FAILED. Idempotent producers need nothing more
    (KIP-679)."""
    if _has_transactional_records(request) and not (
        request.transactional_id is not None
        and permissions.allows_transactional_id(Operation.WRITE, request.transactional_id)
    ):
        refused = _refused_writes(
            request.topic_data, ErrorCode.transactional_id_authorization_failed
        )
        return await _produced(_with_topics(request, ()), context, refused)
    names = {topic.name for topic in request.topic_data}
    writable = permissions.topics(Operation.WRITE, names)
    if writable == names:
        return await handle(request, context)
    allowed = tuple(topic for topic in request.topic_data if topic.name in writable)
    denied = [topic for topic in request.topic_data if topic.name not in writable]
    refused = _refused_writes(denied, ErrorCode.topic_authorization_failed)
    return await _produced(_with_topics(request, allowed), context, refused)


async def _produced(
    request: ProduceRequest, context: RequestContext, refused: list[TopicAnswers]
) -> list[Part] | None:
    """Produce's answer to the allowed ``request``, and after it the ``refused``
    partitions' (Kafka's mergedResponseStatus), encoded together; None for acks=0."""
    appended = produce.append_all(request, context)
    if request.acks == 0:
        return None
    await produce.wait_durable(appended)
    return produce.encode(context, produce.answers(appended) + refused)


def _has_transactional_records(request: ProduceRequest) -> bool:
    """Whether the first batch of some partition is transactional (Kafka's
    RequestUtils.hasTransactionalRecords); a partition too short to say is left to the
    handler, which refuses it."""
    for topic in request.topic_data:
        for partition in topic.partition_data:
            records = partition.records
            if records is not None and len(records) >= ATTRIBUTES_OFFSET + _ATTRIBUTES.size:
                (attributes,) = _ATTRIBUTES.unpack_from(records, ATTRIBUTES_OFFSET)
                if attributes & TRANSACTIONAL_FLAG_MASK:
                    return True
    return False


def _with_topics(request: ProduceRequest, topics: tuple[TopicData, ...]) -> ProduceRequest:
    return dataclasses.replace(request, topic_data=topics)


def _refused_writes(topics: Iterable[TopicData], error: ErrorCode) -> list[TopicAnswers]:
    return [
        (
            topic.name,
            [PartitionAnswer(data.index, error, NO_OFFSET) for data in topic.partition_data],
        )
        for topic in topics
    ]


async def fetch_rule(
    request: FetchRequest,
    context: RequestContext,
    permissions: Permissions,
    handle: Handler[FetchRequest, list[Part]],
) -> list[Part]:
    """A consumer needs READ on each topic, or its partitions are
    TOPIC_AUTHORIZATION_FAILED; a follower (replica id 0 or more) needs CLUSTER_ACTION on
    the cluster, or every partition is. Topics are authorised once the session says which
    partitions the request reads: in an incremental fetch, every partition of its session
    (KIP-227), not only those the request names, as Kafka authorises them."""
    follower = request.replica_id >= 0
    if follower and permissions.allows_cluster(Operation.CLUSTER_ACTION):
        return await handle(request, context)
    session = fetch.open_session(request, context)
    if session.error_code:  # a session error: no partition is read
        return fetch.session_error(context, session.error_code)
    wanted = session.wanted
    readable = frozenset() if follower else permissions.topics(Operation.READ, _topics(wanted))
    allowed = [(key, partition) for key, partition in wanted if key.topic in readable]
    targets, erroneous = fetch.resolve(context, allowed)
    if len(allowed) < len(wanted):
        erroneous = _with_refused(wanted, readable, erroneous)
    return await fetch.answer(request, context, session, targets, erroneous)


def _topics(wanted: Wanted) -> set[str]:
    return {key.topic for key, _ in wanted}


def _with_refused(wanted: Wanted, readable: Collection[str], erroneous: Answered) -> Answered:
    """The answers ``erroneous`` (of readable partitions, in the order ``wanted``) and
    TOPIC_AUTHORIZATION_FAILED for each partition of a topic not ``readable``, all in the
    order ``wanted`` (Kafka's ``erroneous``, built in one pass over the session's
    partitions)."""
    unknown = iter(erroneous)
    next_unknown = next(unknown, None)
    merged: Answered = []
    for key, _ in wanted:
        if key.topic not in readable:
            merged.append(
                (key, fetch.error_answer(key.partition, ErrorCode.topic_authorization_failed))
            )
        elif next_unknown is not None and next_unknown[0] == key:
            merged.append(next_unknown)
            next_unknown = next(unknown, None)
    return merged


async def metadata_rule(
    request: MetadataRequest,
    context: RequestContext,
    permissions: Permissions,
    handle: Handler[MetadataRequest, list[Part]],
) -> list[Part]:
    """An all-topics request lists the topics the client may DESCRIBE, and no others. A
    topic named without DESCRIBE is TOPIC_AUTHORIZATION_FAILED, whether or not it exists;
    so is one that would be auto-created, without CREATE on the cluster or on the topic.
    KIP-430's operations, when asked for, are the principal's: the cluster's only with
    DESCRIBE on it, 0 otherwise (KafkaApis.handleTopicMetadataRequest)."""
    names = metadata.requested_names(request, context.version)
    # Asked for, each topic's operations are authorised one by one (as Kafka's are): for
    # every topic, an all-topics request makes several decisions the memo keeps.
    operations = metadata.authorized_operations(
        request,
        context.version,
        topic=lambda name: permissions.operations(ResourceType.TOPIC, name),
        cluster=lambda: _cluster_operations(permissions),
    )

    def describable(name: str) -> bool:
        return permissions.allows_topic(Operation.DESCRIBE, name)

    by_id = await metadata.answer_ids(request, context, operations, describable)
    if by_id is not None:  # topic ids or null names (v10+): see answer_ids
        return by_id
    if names is None:
        listed = await metadata.topic_entries(
            context, None, False, describable=describable, operations=operations
        )
        return [metadata.response(context, listed, operations)]
    allow_create = metadata.auto_creates(request, context.broker)
    creations = _Creations(context, permissions) if allow_create else None
    allowed, refused = _split_names(names, permissions, creations)
    topics = await metadata.topic_entries(context, allowed, allow_create, operations=operations)
    # The refused after the others, with no authorized operations (as Kafka's).
    topics.extend(encode_topic(context.version, topic) for topic in refused)
    return [metadata.response(context, topics, operations)]


def _split_names(
    names: tuple[str | None, ...], permissions: Permissions, creations: _Creations | None
) -> tuple[tuple[str | None, ...], list[MetadataResponseTopic]]:
    """The names the client may describe (and auto-create, where ``creations`` says), and
    the entries of the others, each in the order asked."""
    allowed: list[str | None] = []
    refused: list[MetadataResponseTopic] = []
    for name in names:
        # No name is None here: answer_ids answered every request with one.
        if name is None or (
            permissions.allows_topic(Operation.DESCRIBE, name)
            and (creations is None or creations.allowed(name))
        ):
            allowed.append(name)
        else:
            refused.append(_refused_topic(name))
    return tuple(allowed), refused


def _cluster_operations(permissions: Permissions) -> int:
    """The cluster's operations for Metadata v8-v10: 0 without DESCRIBE on the cluster,
    as Kafka's KafkaApis.handleTopicMetadataRequest answers."""
    if not permissions.allows_cluster(Operation.DESCRIBE):
        return 0
    return permissions.operations(ResourceType.CLUSTER, CLUSTER_NAME)


class _Creations:
    """Whether a named topic that does not exist may be auto-created: CREATE on the cluster
    (asked once) or on the topic. Names whose auto-creation creates no topic (views, the
    delay companion of an existing topic) need nothing; ``T.delay`` of no ``T`` creates
    ``T``, so needs what ``T`` needs (the resolver's ``may_create``)."""

    def __init__(self, context: RequestContext, permissions: Permissions) -> None:
        self._resolver = context.broker.resolver
        self._permissions = permissions
        self._on_cluster: bool | None = None

    def allowed(self, name: str) -> bool:
        resolver = self._resolver
        if resolver.resolve(name) is not None or not resolver.may_create(name):
            return True
        if self._on_cluster is None:
            self._on_cluster = self._permissions.allows_cluster(Operation.CREATE)
        return self._on_cluster or self._permissions.allows_topic(Operation.CREATE, name)


def _refused_topic(name: str) -> MetadataResponseTopic:
    # No topic id, so an unauthorised client learns nothing (KafkaApis: Uuid.ZERO_UUID).
    return MetadataResponseTopic(
        error_code=ErrorCode.topic_authorization_failed,
        name=name,
        topic_id=NO_TOPIC_ID,
        is_internal=False,
        partitions=[],
    )


# Each topic needs DESCRIBE, or its partitions are TOPIC_AUTHORIZATION_FAILED.
list_offsets_rule = item_by_item(
    Listing(ListOffsetsRequest, "topics", ListOffsetsResponse, "topics"),
    topics_need(Operation.DESCRIBE),
    partition_by_partition(ListOffsetsTopicResponse, ListOffsetsPartitionResponse),
)

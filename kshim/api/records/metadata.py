"""Metadata (key 3): brokers, topics and partition leaders; auto-creates topics when allowed.

Metadata for all topics lists the stored topics only; a full-data view ``T.full`` is
answered when asked for by name, and its name is never auto-created (the topic resolver
says which names are views and which are listed). A delay companion ``T.delay`` is
created when first named; with auto-creation on, naming it creates ``T`` too if need be
(a producer's first request), and otherwise a missing ``T`` is logged as the reason it is
unknown (broker/refusal_log.py). Why leave the views and companions out:

- Every client's pattern subscription (the classic group protocol) matches the topics of
  a Metadata request for all topics: the Java consumer's (``subscribe(Pattern)``, used by
  Spark's ``subscribePattern`` and by Kafka Connect's ``topics.regex``), librdkafka's for a
  topic starting with ``^``, kafka-python's and aiokafka's ``subscribe(pattern=...)``.
  Spark's default offset reader matches ``AdminClient.listTopics``, the same request. A
  listed view would be matched by ``orders.*`` with ``orders``, and every record read twice.
- Marking views ``is_internal`` (Metadata v1+), as Kafka marks ``__consumer_offsets``,
  would not do. The Java consumer (``exclude.internal.topics``), kafka-python and aiokafka
  (``exclude_internal_topics``) leave internal topics out of patterns, but librdkafka's
  regex matching looks at ``topic.blacklist`` only, never at ``is_internal``; and Spark's
  source drops internal topics even when named (``ConsumerStrategy.retrieveAllPartitions``
  filters ``isInternal`` for ``subscribe`` and ``assign`` too), so ``subscribe=T.full``
  would read nothing. Views therefore stay ``is_internal=False``.
- Named requests still find a view: ``subscribe(["T.full"])``, ``assign``, Spark's
  ``subscribe``/``assign`` (its admin client describes topics by name), DescribeConfigs.

So admin listings (``kafka-topics --list``, ``AdminClient.listTopics`` with or without
``listInternal``, confluent-kafka's ``list_topics()``, ``kcat -L``) show no views, while
``--describe --topic T.full`` and ``list_topics("T.full")`` answer for one. One gap is
librdkafka's own: its regex subscription matches every topic in its metadata cache, which
also holds topics the same client asked for by name, until they expire
(``metadata.max.age.ms``); a client that reads ``T.full`` by name and subscribes to a
pattern matching it may match the view.

Clients ask for Metadata often and for many topics at once (all of them, or, from
librdkafka, every topic it produces to), so the answer is assembled from each topic's
entry as ``broker.topic_descriptions`` keeps it encoded, by the hand-written encoder in
protocol/metadata_response.py; the bytes are those kio's encoder writes for the typed
response.

KIP-430: asked for (v8+), each answered topic's entry carries the operations the client
may perform on it, and (v8-v10) the answer those on the cluster. Without an authoriser
that is every operation the resource type supports, as in Kafka; where ACLs apply, the
access rule (access.py) computes them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kshim.api.context import RequestContext
from kshim.api.records.services import MetadataServices
from kshim.broker.topic_resolver import NO_TOPIC_ID, ResolvedTopic
from kshim.broker.topics import TopicError, validate_topic_name
from kshim.protocol.acls import ResourceType, all_supported
from kshim.protocol.errors import ErrorCode
from kshim.protocol.fetch_response import Part
from kshim.protocol.messages.metadata import MetadataResponseBroker, MetadataResponseTopic
from kshim.protocol.metadata_request import MetadataRequest
from kshim.protocol.metadata_response import (
    FIRST_WITH_AUTHORIZED_OPERATIONS,
    FIRST_WITH_TOPIC_ID,
    LAST_WITH_CLUSTER_AUTHORIZED_OPERATIONS,
    UNKNOWN_AUTHORIZED_OPERATIONS,
    encode_metadata_response,
    encode_topic,
    with_topic_authorized_operations,
)


@dataclass(frozen=True, slots=True)
class AuthorizedOperations:
    """KIP-430's part of one answer: ``topic`` gives a topic's operations by name (None:
    not asked for), ``cluster`` is the cluster's (Kafka's "not asked" value unless asked)."""

    topic: Callable[[str], int] | None = None
    cluster: int = UNKNOWN_AUTHORIZED_OPERATIONS


NOT_ASKED = AuthorizedOperations()
FIRST_BY_TOPIC_ID = 12  # Kafka 3.9 looks topics up by id from Metadata v12 on
NO_CONTROLLER = -1


async def handle(request: MetadataRequest, context: RequestContext[MetadataServices]) -> list[Part]:
    operations = authorized_operations(
        request, context.version, topic=_every_topic_operation, cluster=_every_cluster_operation
    )
    by_id = await answer_ids(request, context, operations)
    if by_id is not None:
        return by_id
    names = requested_names(request, context.version)
    allow_create = names is not None and auto_creates(request, context.broker)
    topics = await topic_entries(context, names, allow_create, operations=operations)
    return [response(context, topics, operations)]


def _every_topic_operation(name: str) -> int:
    return all_supported(ResourceType.TOPIC)


def _every_cluster_operation() -> int:
    return all_supported(ResourceType.CLUSTER)


async def topic_entries(
    context: RequestContext[MetadataServices],
    names: tuple[str | None, ...] | None,
    allow_create: bool,
    describable: Callable[[str], bool] | None = None,
    operations: AuthorizedOperations = NOT_ASKED,
) -> list[bytes]:
    """The encoded entries of the topics ``names`` (None: every stored topic), creating
    those missing when ``allow_create``. Where ACLs apply (access.py), ``describable`` says
    which stored topics an all-topics answer lists."""
    broker = context.broker
    version = context.version
    node_id = broker.config.node_id
    if names is None:
        listed = broker.resolver.listed()
        if describable is not None:
            listed = (topic for topic in listed if describable(topic.name))
        if operations.topic is None:
            topics = broker.topic_descriptions.entries(listed, node_id, version)
        else:
            shown = list(listed)
            entries = broker.topic_descriptions.entries(shown, node_id, version)
            names_shown: Sequence[str | None] = [topic.name for topic in shown]
            topics = _with_operations(entries, names_shown, version, operations.topic)
    else:
        topics = await _named(context, names, allow_create)
        if operations.topic is not None:
            topics = _with_operations(topics, names, version, operations.topic)
    return topics


def response(
    context: RequestContext[MetadataServices],
    topics: Sequence[bytes],
    operations: AuthorizedOperations,
) -> bytes:
    """The answer's body: this broker, the cluster, and the topics' entries in order."""
    broker = context.broker
    host, port = broker.endpoints.address(context.session.listener)
    node_id = broker.config.node_id
    return encode_metadata_response(
        context.version,
        brokers=[MetadataResponseBroker(node_id=node_id, host=host, port=port, rack=None)],
        cluster_id=broker.config.values["cluster.id"],
        controller_id=node_id,
        topics=topics,
        cluster_authorized_operations=operations.cluster,
    )


def authorized_operations(
    request: MetadataRequest,
    version: int,
    topic: Callable[[str], int],
    cluster: Callable[[], int],
) -> AuthorizedOperations:
    """What the request asks of KIP-430, computed by ``topic`` (by name) and ``cluster``:
    topics' operations from v8, the cluster's in v8-v10 (KIP-700 moved it to
    DescribeCluster)."""
    if version < FIRST_WITH_AUTHORIZED_OPERATIONS:
        return NOT_ASKED
    asks_cluster = (
        version <= LAST_WITH_CLUSTER_AUTHORIZED_OPERATIONS
        and request.include_cluster_authorized_operations
    )
    return AuthorizedOperations(
        topic if request.include_topic_authorized_operations else None,
        cluster() if asks_cluster else UNKNOWN_AUTHORIZED_OPERATIONS,
    )


def _with_operations(
    entries: list[bytes],
    names: Sequence[str | None],
    version: int,
    operations: Callable[[str], int],
) -> list[bytes]:
    """Each entry with its topic's operations; an entry without a name (an unknown topic
    id) keeps Kafka's "not asked" value, as Kafka's answer for unknown ids does."""
    return [
        entry
        if name is None
        else with_topic_authorized_operations(entry, version, operations(name))
        for entry, name in zip(entries, names, strict=True)
    ]


def requested_names(request: MetadataRequest, version: int) -> tuple[str | None, ...] | None:
    """The names asked for, each once in the order first asked (Kafka answers a set of
    names); None means every topic: a null list (v1+) or, in v0, an empty one."""
    if request.topics is None or (version == 0 and not request.topics):
        return None
    return tuple(dict.fromkeys(request.topics))


def auto_creates(request: MetadataRequest, broker: MetadataServices) -> bool:
    """Whether a named topic that does not exist is created: the request allows it (always
    before v4) and so does ``auto.create.topics.enable``."""
    return request.allow_auto_topic_creation and broker.config.get_bool("auto.create.topics.enable")


async def _named(
    context: RequestContext[MetadataServices], names: tuple[str | None, ...], allow_create: bool
) -> list[bytes]:
    """The entries of the topics asked for, in the order asked."""
    broker, version = context.broker, context.version
    node_id = broker.config.node_id
    resolver, descriptions = broker.resolver, broker.topic_descriptions
    entries = []
    for name in names:
        resolved = None if name is None else resolver.resolve(name)
        if resolved is None:
            found = await _unresolved(context, name, allow_create)
            if isinstance(found, MetadataResponseTopic):
                entries.append(encode_topic(version, found))
                continue
            resolved = found
        entries.append(descriptions.encoded(resolved, node_id, version))
    return entries


async def _unresolved(
    context: RequestContext[MetadataServices], name: str | None, allow_create: bool
) -> ResolvedTopic | MetadataResponseTopic:
    """A name that resolves to nothing yet: the topic auto-created for it, or the error
    entry to answer (its reason logged, when it has one: topic_resolver.refuse_unknown)."""
    if name is None:
        return _error(None, ErrorCode.unknown_topic_id)
    # Kafka answers an illegal name so whether or not it may auto-create topics
    # (KafkaApis.getTopicMetadata).
    try:
        validate_topic_name(name)
    except TopicError as error:
        return _error(name, ErrorCode(error.code))
    broker = context.broker
    resolver = broker.resolver
    try:
        # A delay companion is created when first named, whether or not topics may be.
        resolved = await resolver.create_companion(name)
        if resolved is None and allow_create:
            partitions = broker.config.get_int("num.partitions")
            resolved = await resolver.auto_create(name, partitions)
        if resolved is None:
            resolver.refuse_unknown(name)
    except TopicError as error:
        code = ErrorCode(error.code)
        client_id = context.header.client_id
        broker.refusals.refused("Metadata", name, client_id, code, str(error))
        return _error(name, code)
    return _error(name, ErrorCode.unknown_topic_or_partition) if resolved is None else resolved


def _error(
    name: str | None, code: ErrorCode, topic_id: uuid.UUID = NO_TOPIC_ID
) -> MetadataResponseTopic:
    return MetadataResponseTopic(error_code=code, name=name, topic_id=topic_id, partitions=[])


# Topic ids and null names (KIP-516), as Kafka 3.9's KafkaApis.handleTopicMetadataRequest
# answers them.


async def answer_ids(
    request: MetadataRequest,
    context: RequestContext[MetadataServices],
    operations: AuthorizedOperations,
    describable: Callable[[str], bool] | None = None,
) -> list[Part] | None:
    """The answer to a request naming a topic id or a null name (v10+), or None for one
    naming topics by name only, the usual kind (``answer`` serves it).

    - v10 and v11 cannot look topics up by id: Kafka refuses the whole request with its
      error response (MetadataRequest.getErrorResponse), every topic INVALID_REQUEST.
    - v12 with an id asks by id alone (names are ignored): each distinct id once, the
      unknown ones UNKNOWN_TOPIC_ID with a null name first, then the topics found, then
      those ``describable`` refuses (TOPIC_AUTHORIZATION_FAILED with a null name: ids are
      not secret). A view is never found by id.
    - v12 with a null name and no id: Kafka 3.9 fails on it and answers its error
      response with UNKNOWN_SERVER_ERROR; so does kshim.
    """
    version, names = context.version, request.topics
    if version < FIRST_WITH_TOPIC_ID or names is None:
        return None
    if not request.topic_ids and None not in names:
        return None
    if version < FIRST_BY_TOPIC_ID:
        return [_error_response(request, version, ErrorCode.invalid_request)]
    if not request.topic_ids:
        return [_error_response(request, version, ErrorCode.unknown_server_error)]
    ids = [uuid.UUID(bytes=raw) for raw in dict.fromkeys(request.topic_ids)]
    topics = _by_id(context, [topic_id for topic_id in ids if topic_id != NO_TOPIC_ID],
                    operations, describable)  # fmt: skip
    return [response(context, topics, operations)]


def _by_id(
    context: RequestContext[MetadataServices],
    ids: Sequence[uuid.UUID],
    operations: AuthorizedOperations,
    describable: Callable[[str], bool] | None,
) -> list[bytes]:
    """The entries of the topics ``ids`` name, in Kafka's order (see ``answer_ids``)."""
    broker, version = context.broker, context.version
    unknown, found, refused = [], [], []
    for topic_id in ids:
        stored = broker.resolver.resolve_id(topic_id)
        resolved = None if stored is None else broker.resolver.resolve(stored.name)
        if resolved is None:
            unknown.append(
                encode_topic(version, _error(None, ErrorCode.unknown_topic_id, topic_id))
            )
        elif describable is not None and not describable(resolved.name):
            denied = _error(None, ErrorCode.topic_authorization_failed, topic_id)
            refused.append(encode_topic(version, denied))
        else:
            found.append(resolved)
    node_id = broker.config.node_id
    entries = [broker.topic_descriptions.encoded(topic, node_id, version) for topic in found]
    if operations.topic is not None:
        entries = _with_operations(entries, [t.name for t in found], version, operations.topic)
    return [*unknown, *entries, *refused]


def _error_response(request: MetadataRequest, version: int, code: ErrorCode) -> bytes:
    """Kafka's error response to a Metadata request: no brokers, no cluster id, controller
    -1, and every topic asked for with ``code``, its id, and "" for a null name."""
    names = request.topics or ()
    ids = request.topic_ids or (bytes(16),) * len(names)
    topics = [
        encode_topic(version, _error(name or "", code, uuid.UUID(bytes=raw)))
        for name, raw in zip(names, ids, strict=True)
    ]
    return encode_metadata_response(
        version, brokers=[], cluster_id=None, controller_id=NO_CONTROLLER, topics=topics
    )

"""CreateTopics (key 19). Names of full-data views are reserved (the topic resolver says
which: ``refuse_creation``). A topic not created is answered as Kafka's controller
answers it: its error and message, and (v5+) no partition count, replication factor or
configs (-1, -1 and an empty list).

As Kafka's controller, one request creates at most one batch of records
(``MAX_RECORDS_PER_REQUEST``): a request asking for more partitions than that in all, or
whose topics that would be created need more records (a topic record, a partition record
per partition, a config record per config set), is refused whole, every topic
POLICY_VIOLATION in Kafka 3.9's words (ReplicationControlManager's
validateTotalNumberOfPartitions, then EventHandlerExceptionInfo's answer to its full record
list)."""

from __future__ import annotations

import uuid

from kshim.api.admin.services import CreatesTopics
from kshim.api.context import RequestContext
from kshim.broker.config.describe import describe_created_topic_configs
from kshim.broker.config.topic_configs import TopicConfigs
from kshim.broker.topic_resolver import NO_TOPIC_ID
from kshim.broker.topics import (
    INVALID_REPLICATION_FACTOR,
    MAX_RECORDS_PER_REQUEST,
    Topic,
    TopicError,
)
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.create_topics import (
    CreatableTopic,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
)

DEFAULT = -1
TOO_MANY_PARTITIONS = "Excessively large number of partitions per request."
TOO_LARGE_BATCH = "Unable to perform excessively large batch operation."


async def handle(
    request: CreateTopicsRequest, context: RequestContext[CreatesTopics]
) -> CreateTopicsResponse:
    refusal = await _batch_refusal(request.topics, context.broker)
    if refusal is not None:
        return CreateTopicsResponse(
            throttle_time_ms=0, topics=[_refused(topic.name, refusal) for topic in request.topics]
        )
    return CreateTopicsResponse(
        throttle_time_ms=0,
        topics=[await _create(topic, request.validate_only, context) for topic in request.topics],
    )


async def _create(
    topic: CreatableTopic, validate_only: bool, context: RequestContext[CreatesTopics]
) -> CreatableTopicResult:
    broker = context.broker
    partitions = _partition_count(topic, broker)
    overrides = _overrides(topic)
    try:
        created = await _checked_create(topic, partitions, validate_only, broker)
    except TopicError as error:
        return _refused(topic.name, error)
    set_here = {name: value for name, value in overrides.items() if value is not None}
    configs = TopicConfigs(
        broker.topics.effective_configs(set_here), frozenset(overrides), read_only=False
    )
    return CreatableTopicResult(
        name=topic.name,
        # validate_only creates no topic, so there is no id yet
        topic_id=NO_TOPIC_ID if created is None else uuid.UUID(bytes=created.record.topic_id),
        error_code=ErrorCode.none,
        error_message=None,
        num_partitions=partitions,
        replication_factor=1,
        configs=describe_created_topic_configs(configs, broker.config.static_settings()),
    )


def _refused(name: str, error: TopicError) -> CreatableTopicResult:
    return CreatableTopicResult(
        name=name,
        topic_id=NO_TOPIC_ID,
        error_code=ErrorCode(error.code),
        error_message=str(error),
        configs=[],  # v5+: empty, not null, as Kafka's controller leaves it
    )


async def _checked_create(
    topic: CreatableTopic, partitions: int, validate_only: bool, broker: CreatesTopics
) -> Topic | None:
    """The topic created (None when ``validate_only``); raises TopicError."""
    broker.resolver.refuse_creation(topic.name)
    if topic.replication_factor not in (DEFAULT, 1):
        raise TopicError(INVALID_REPLICATION_FACTOR, "a single broker keeps one replica")
    return await broker.topics.create(topic.name, partitions, _overrides(topic), validate_only)


def _partition_count(topic: CreatableTopic, broker: CreatesTopics) -> int:
    if topic.assignments:
        return len(topic.assignments)
    if topic.num_partitions == DEFAULT:
        return broker.config.get_int("num.partitions")
    return topic.num_partitions


def _overrides(topic: CreatableTopic) -> dict[str, str | None]:
    return {config.name: config.value for config in topic.configs}


async def _batch_refusal(topics: list[CreatableTopic], broker: CreatesTopics) -> TopicError | None:
    """Why the request does not fit in one controller batch, or None. The partitions asked
    for are counted before anything is checked; the records only of the topics that would
    be created (validated here only when all of them together could be too many)."""
    counts = [max(_partition_count(topic, broker), 0) for topic in topics]
    if sum(counts) > MAX_RECORDS_PER_REQUEST:
        return TopicError(ErrorCode.policy_violation, TOO_MANY_PARTITIONS)
    records = [
        1 + count + len(_overrides(topic)) for topic, count in zip(topics, counts, strict=True)
    ]
    if sum(records) <= MAX_RECORDS_PER_REQUEST:
        return None
    needed = 0
    for topic, count, topic_records in zip(topics, counts, records, strict=True):
        try:
            await _checked_create(topic, count, True, broker)
        except TopicError:
            continue  # refused on its own: nothing of it in the batch
        needed += topic_records
    if needed > MAX_RECORDS_PER_REQUEST:
        return TopicError(ErrorCode.policy_violation, TOO_LARGE_BATCH)
    return None

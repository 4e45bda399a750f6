"""Produce (key 0): each partition's batch appended by the partition service.

The partition service (broker/partitions/service.py) checks each batch, stamps its
offsets and appends its bytes as received. A response (acks 1 or -1) is sent only once
every appended batch is fsynced; acks=0 gets none. One bad partition never fails the
others. A refusal's reason goes in the answer's error_message (v8+) and, once per kind
and topic a minute, in the broker's log (refusal_log.py).
"""

from __future__ import annotations

from kshim.api.context import RequestContext
from kshim.api.services import WithPartitions
from kshim.broker.partitions.service import AppendResult, PartitionService
from kshim.protocol.fetch_response import Part
from kshim.protocol.produce_request import PartitionData, ProduceRequest
from kshim.protocol.produce_response import PartitionAnswer, TopicAnswers, encode_produce_response
from kshim.storage.interface import TopicPartition

# Each topic's partitions' results (partition index, result), in the order of the request.
Appended = list[tuple[str, list[tuple[int, AppendResult]]]]


async def handle(
    request: ProduceRequest, context: RequestContext[WithPartitions]
) -> list[Part] | None:
    """Appends every partition of ``request`` and answers for them, once every appended
    batch is durable; None for acks=0."""
    appended = append_all(request, context)
    if request.acks == 0:
        return None
    await wait_durable(appended)
    return encode(context, answers(appended))


def append_all(request: ProduceRequest, context: RequestContext[WithPartitions]) -> Appended:
    """Appends each partition's batch of ``request``, or says why not."""
    return [
        (topic.name, [(data.index, _append(context, topic.name, data, request))
                      for data in topic.partition_data])
        for topic in request.topic_data
    ]  # fmt: skip


async def wait_durable(appended: Appended) -> None:
    """Returns once every batch appended is on disk."""
    # One after the other: every partition's flush is already under way, so this waits
    # as long as gather() would, without a task per partition.
    for _, partitions in appended:
        for _, result in partitions:
            await PartitionService.wait_durable(result)


def answers(appended: Appended) -> list[TopicAnswers]:
    """Each partition's answer, by topic in the order appended."""
    return [
        (name, [_answer(index, result) for index, result in partitions])
        for name, partitions in appended
    ]


def encode(context: RequestContext[WithPartitions], topics: list[TopicAnswers]) -> list[Part]:
    """The response's body, answering ``topics`` in their order."""
    return [encode_produce_response(context.header.api_version, topics)]


def _append(
    context: RequestContext[WithPartitions],
    topic_name: str,
    data: PartitionData,
    request: ProduceRequest,
) -> AppendResult:
    return context.broker.partitions.append(
        TopicPartition(topic_name, data.index),
        data.records,
        request.transactional_id,
        context.header.client_id,
    )


def _answer(index: int, result: AppendResult) -> PartitionAnswer:
    return PartitionAnswer(
        index,
        result.error_code,
        result.base_offset,
        result.log_append_time,
        result.log_start_offset,
        result.error_message,
    )

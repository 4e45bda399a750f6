"""What the rules that split a request share: the allowed part for the handler, the refused
part answered with an error in the response's own shape, and the two answers merged.

Kafka's handlers do this in each API (KafkaApis: the request's topics filtered with
``filterByAuthorized``, the refused ones answered with an authorisation error and merged
with the others' answers into one response, after them); these functions are that
pattern once, typed over the items and their answers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, TypeVar

from kshim.api.access.permissions import Permissions
from kshim.api.access.rule import Handler, RequestT, ResponseT
from kshim.api.context import RequestContext
from kshim.broker.security.acls.model import Operation

ItemT = TypeVar("ItemT")
AnswerT = TypeVar("AnswerT")
PartitionAnswerT = TypeVar("PartitionAnswerT")


class Named(Protocol):
    """A request's entry for one topic."""

    @property
    def name(self) -> str: ...


class PartitionIndexed(Protocol):
    """A request's entry for one partition of a topic."""

    @property
    def partition_index(self) -> int: ...


class NamedPartitions(Named, Protocol):
    """A request's entry for one topic and the partitions it names."""

    @property
    def partitions(self) -> Sequence[PartitionIndexed]: ...


NamedT = TypeVar("NamedT", bound=Named)


def split(
    items: Iterable[ItemT], allowed: Callable[[ItemT], bool]
) -> tuple[list[ItemT], list[ItemT]]:
    """(the items ``allowed`` says yes to, the others), each in the order given."""
    yes: list[ItemT] = []
    no: list[ItemT] = []
    for item in items:
        (yes if allowed(item) else no).append(item)
    return yes, no


def split_topics(
    permissions: Permissions, operation: Operation, topics: Sequence[NamedT]
) -> tuple[list[NamedT], list[NamedT]]:
    """(the topics whose names allow ``operation``, the others), each name asked about
    once, each list in the order given."""
    allowed_names = permissions.topics(operation, (topic.name for topic in topics))
    return split(topics, lambda topic: topic.name in allowed_names)


def refused_partitions(
    topics: Iterable[NamedPartitions],
    topic_answer: Callable[[str, list[PartitionAnswerT]], AnswerT],
    partition_answer: Callable[[int], PartitionAnswerT],
) -> list[AnswerT]:
    """Each topic's answer, with ``partition_answer``'s (an error) for every partition it
    names, in the order asked."""
    return [
        topic_answer(
            topic.name,
            [partition_answer(partition.partition_index) for partition in topic.partitions],
        )
        for topic in topics
    ]


async def merged(
    handle: Handler[RequestT, ResponseT],
    context: RequestContext,
    narrowed: RequestT | None,
    nothing_allowed: Callable[[], ResponseT],
    answers: Callable[[ResponseT], list[AnswerT]],
    refused: Iterable[AnswerT],
) -> ResponseT:
    """The handler's response to the allowed part of a request (``narrowed``; None when
    nothing is allowed, and then ``nothing_allowed()`` without asking the handler), with
    the ``refused`` answers after the handler's in its list ``answers``."""
    response = nothing_allowed() if narrowed is None else await handle(narrowed, context)
    answers(response).extend(refused)
    return response

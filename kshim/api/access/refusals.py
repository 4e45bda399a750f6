"""What the rules that split a request share: the allowed part for the handler, the refused
part answered with an error in the response's own shape, and the two answers merged.

Kafka's handlers do this in each API (KafkaApis: the request's topics filtered with
``filterByAuthorized``, the refused ones answered with an authorisation error and merged
with the others' answers into one response, after them); ``item_by_item`` is that pattern
once, and an API's rule names only what is its own: where its request and response list
the items (a ``Listing``), how each item is decided (a ``Refusals``), and a refused item's
answer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar, cast

from kshim.api.access.permissions import Permissions
from kshim.api.access.rule import Check, Handler, RequestT, ResponseT
from kshim.api.context import RequestContext
from kshim.protocol.acls import Operation
from kshim.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

ItemT = TypeVar("ItemT")
AnswerT = TypeVar("AnswerT")
AnswerT_co = TypeVar("AnswerT_co", covariant=True)
PartitionAnswerT = TypeVar("PartitionAnswerT")
MessageT = TypeVar("MessageT", bound="DataclassInstance")


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


class TopicAnswer(Protocol[PartitionAnswerT, AnswerT_co]):
    """A response's class for one topic's answers (each API has its own)."""

    def __call__(self, *, name: str, partitions: list[PartitionAnswerT]) -> AnswerT_co: ...


class PartitionAnswer(Protocol[AnswerT_co]):
    """A response's class for one partition's answer, its other fields at the schema's
    defaults (Kafka's "none": -1 for offsets, epochs and timestamps)."""

    def __call__(self, *, partition_index: int, error_code: ErrorCode) -> AnswerT_co: ...


# The error refusing each of a request's items, or None where it is allowed, in their order.
Refusals = Callable[[Permissions, RequestT, Sequence[ItemT]], list[ErrorCode | None]]


@dataclasses.dataclass(frozen=True, slots=True)
class Listing(Generic[MessageT, ResponseT]):
    """Where an API's request lists the items it decides one by one (``request_type``'s
    field ``items``), and where its response answers them (``response_type``'s field
    ``answers``). Each response class here is made from ``throttle_time_ms`` and that list
    alone; a field misnamed fails at import, not at the first refusal."""

    request_type: type[MessageT]
    items: str
    response_type: Callable[..., ResponseT]
    answers: str

    def __post_init__(self) -> None:
        # Both checked here, so that a field misnamed fails at import, not at a refusal.
        if self.items not in {field.name for field in dataclasses.fields(self.request_type)}:
            raise TypeError(f"{self.request_type.__name__} has no field {self.items}")
        self.nothing_allowed()

    def items_of(self, request: MessageT) -> Sequence[object]:
        items: Sequence[object] = getattr(request, self.items)
        return items

    def narrowed(self, request: MessageT, items: list[ItemT]) -> MessageT:
        return dataclasses.replace(request, **{self.items: items})

    def nothing_allowed(self) -> ResponseT:
        return self.response_type(throttle_time_ms=0, **{self.answers: []})

    def answers_of(self, response: ResponseT) -> list[object]:
        answers: list[object] = getattr(response, self.answers)
        return answers


def item_by_item(
    listing: Listing[MessageT, ResponseT],
    refusals: Refusals[MessageT, ItemT],
    refused: Callable[[ItemT, ErrorCode], object],
) -> Check[MessageT, ResponseT]:
    """The rule of an API whose request's items are allowed or refused one by one: the
    handler answers the allowed ones (and is not asked when none is), and ``refused``'s
    answers for the others, each item with its error, follow its answers in the order
    asked, as Kafka merges them."""

    async def check(
        request: MessageT,
        context: RequestContext,
        permissions: Permissions,
        handle: Handler[MessageT, ResponseT],
    ) -> ResponseT:
        items = cast("Sequence[ItemT]", listing.items_of(request))
        errors = refusals(permissions, request, items)
        decided = list(zip(items, errors, strict=True))
        allowed = [item for item, error in decided if error is None]
        if allowed:
            response = await handle(listing.narrowed(request, allowed), context)
        else:
            response = listing.nothing_allowed()
        listing.answers_of(response).extend(
            refused(item, error) for item, error in decided if error is not None
        )
        return response

    return check


def refused_unless(
    allows: Callable[[Permissions, ItemT], bool], error: ErrorCode
) -> Refusals[object, ItemT]:
    """``error`` for each item ``allows`` refuses."""

    def refusals(
        permissions: Permissions, _request: object, items: Sequence[ItemT]
    ) -> list[ErrorCode | None]:
        return [None if allows(permissions, item) else error for item in items]

    return refusals


def topics_need(operation: Operation) -> Refusals[object, NamedT]:
    """TOPIC_AUTHORIZATION_FAILED for each topic not allowing ``operation``, each name asked
    about once (Kafka's filterByAuthorized)."""

    def refusals(
        permissions: Permissions, _request: object, topics: Sequence[NamedT]
    ) -> list[ErrorCode | None]:
        allowed = permissions.topics(operation, (topic.name for topic in topics))
        return [
            None if topic.name in allowed else ErrorCode.topic_authorization_failed
            for topic in topics
        ]

    return refusals


def whole_first(
    whole: Callable[[Permissions, RequestT], ErrorCode | None],
    then: Refusals[RequestT, ItemT],
) -> Refusals[RequestT, ItemT]:
    """``whole``'s error for every item when it refuses the request as a whole (a group or
    transactional id every item needs), else ``then``'s decisions."""

    def refusals(
        permissions: Permissions, request: RequestT, items: Sequence[ItemT]
    ) -> list[ErrorCode | None]:
        error = whole(permissions, request)
        return then(permissions, request, items) if error is None else [error] * len(items)

    return refusals


def partition_by_partition(
    topic_answer: TopicAnswer[PartitionAnswerT, AnswerT],
    partition_answer: PartitionAnswer[PartitionAnswerT],
) -> Callable[[NamedPartitions, ErrorCode], AnswerT]:
    """A refused topic's answer: the error for every partition it names."""

    def refused(topic: NamedPartitions, error: ErrorCode) -> AnswerT:
        return topic_answer(
            name=topic.name,
            partitions=[
                partition_answer(partition_index=partition.partition_index, error_code=error)
                for partition in topic.partitions
            ],
        )

    return refused


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

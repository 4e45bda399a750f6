"""What AlterConfigs and IncrementalAlterConfigs share: one resource's checks and answer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from kshim.broker.topic_resolver import ResolvedTopic, TopicResolver
from kshim.broker.topics import TopicError
from kshim.protocol.errors import ErrorCode

TOPIC_RESOURCE = 2

AnswerT_co = TypeVar("AnswerT_co", covariant=True)


class ConfigResource(Protocol):
    """A resource named in AlterConfigs or IncrementalAlterConfigs."""

    @property
    def resource_type(self) -> int: ...

    @property
    def resource_name(self) -> str: ...


class ResourceAnswer(Protocol[AnswerT_co]):
    """The typed response class of one resource (each API has its own)."""

    def __call__(
        self,
        *,
        error_code: ErrorCode,
        error_message: str | None,
        resource_type: int,
        resource_name: str,
    ) -> AnswerT_co: ...


# Changes a topic's configs; given the resolved topic, or None for a name no topic has.
Change = Callable[[ResolvedTopic | None], Awaitable[None]]


async def change_resource(
    resolver: TopicResolver,
    resource: ConfigResource,
    change: Change,
    answer: ResourceAnswer[AnswerT_co],
) -> AnswerT_co:
    """Runs ``change`` for a topic resource (broker configs are static; views are
    read-only) and returns the resource's ``answer``, a TopicError becoming its error
    code and message."""
    error_code = ErrorCode.none
    error_message: str | None = None
    try:
        if resource.resource_type != TOPIC_RESOURCE:
            raise TopicError(ErrorCode.invalid_request, "broker configs are static")
        resolved = resolver.resolve(resource.resource_name)
        if resolved is not None:
            resolved.refuse_change("change its topic instead")
        await change(resolved)
    except TopicError as error:
        error_code, error_message = ErrorCode(error.code), str(error)
    return answer(
        error_code=error_code,
        error_message=error_message,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
    )

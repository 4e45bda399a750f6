"""The fields the gateway reads of kio's decoded requests and answers for ``T.full``.

kio generates one dataclass per message and version; what the view's code reads is the
same in every version it handles, so it is typed by these read-only shapes rather than by
each version's class. ``replaced`` copies an answer's entry with some fields changed, as
``dataclasses.replace`` does, keeping those its version has.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar, cast

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


class FetchPartitionAsked(Protocol):
    @property
    def partition(self) -> int: ...
    @property
    def fetch_offset(self) -> int: ...
    @property
    def partition_max_bytes(self) -> int: ...


class FetchTopicAsked(Protocol):
    @property
    def topic(self) -> str: ...
    @property
    def partitions(self) -> Sequence[FetchPartitionAsked]: ...


class FetchAsked(Protocol):
    @property
    def max_wait(self) -> datetime.timedelta: ...
    @property
    def max_bytes(self) -> int: ...
    @property
    def topics(self) -> Sequence[FetchTopicAsked]: ...


class OffsetsPartitionAsked(Protocol):
    @property
    def partition_index(self) -> int: ...
    @property
    def timestamp(self) -> datetime.datetime | int: ...


class OffsetsTopicAsked(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def partitions(self) -> Sequence[OffsetsPartitionAsked]: ...


class OffsetsAsked(Protocol):
    @property
    def topics(self) -> Sequence[OffsetsTopicAsked]: ...


class EpochPartitionAsked(Protocol):
    @property
    def partition(self) -> int: ...
    @property
    def leader_epoch(self) -> int: ...


class EpochTopicAsked(Protocol):
    @property
    def topic(self) -> str: ...
    @property
    def partitions(self) -> Sequence[EpochPartitionAsked]: ...


class EpochsAsked(Protocol):
    @property
    def topics(self) -> Sequence[EpochTopicAsked]: ...


class MetadataPartition(Protocol):
    @property
    def partition_index(self) -> int: ...


class MetadataTopic(Protocol):
    @property
    def name(self) -> str | None: ...
    @property
    def error_code(self) -> int: ...
    @property
    def partitions(self) -> Sequence[MetadataPartition]: ...


class MetadataBroker(Protocol):
    @property
    def node_id(self) -> int: ...


class MetadataAnswer(Protocol):
    @property
    def topics(self) -> Sequence[MetadataTopic]: ...
    @property
    def brokers(self) -> Sequence[MetadataBroker]: ...


Entry = TypeVar("Entry")


def replaced(entry: Entry, changes: Mapping[str, object]) -> Entry:
    """``entry`` (a kio dataclass) with those of ``changes`` its version has."""
    instance = cast("DataclassInstance", entry)
    fields = instance.__dataclass_fields__
    kept = {name: value for name, value in changes.items() if name in fields}
    return cast(Entry, dataclasses.replace(instance, **kept))

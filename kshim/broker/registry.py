"""The one table from API key to handler."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Awaitable, Callable
from typing import Any

from kshim.broker.context import RequestContext
from kshim.broker.handlers import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_configs,
    api_versions,
    create_partitions,
    create_topics,
    delete_groups,
    delete_records,
    delete_topics,
    describe_configs,
    describe_groups,
    describe_producers,
    describe_transactions,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    produce,
    sync_group,
    txn_offset_commit,
)
from kshim.protocol.apis import ADVERTISED

# A handler returns its API's typed response (protocol/messages/), a dict for the kio
# encoder (handlers not yet typed), already encoded body parts (Fetch), or None when no
# response is due (Produce with acks=0).
Handler = Callable[[Any, RequestContext], Awaitable[object]]

HANDLERS: dict[int, Handler] = {
    0: produce.handle,
    1: fetch.handle,
    2: list_offsets.handle,
    3: metadata.handle,
    8: offset_commit.handle,
    9: offset_fetch.handle,
    10: find_coordinator.handle,
    11: join_group.handle,
    12: heartbeat.handle,
    13: leave_group.handle,
    14: sync_group.handle,
    15: describe_groups.handle,
    16: list_groups.handle,
    18: api_versions.handle,
    19: create_topics.handle,
    20: delete_topics.handle,
    21: delete_records.handle,
    22: init_producer_id.handle,
    32: describe_configs.handle,
    33: alter_configs.handle,
    37: create_partitions.handle,
    42: delete_groups.handle,
    44: incremental_alter_configs.handle,
    24: add_partitions_to_txn.handle,
    25: add_offsets_to_txn.handle,
    26: end_txn.handle,
    28: txn_offset_commit.handle,
    61: describe_producers.handle,
    65: describe_transactions.handle,
    66: list_transactions.handle,
    47: offset_delete.handle,
}

assert HANDLERS.keys() == ADVERTISED.keys(), "every advertised API needs a handler"


def request_type(api_key: int) -> type[Any] | None:
    """The typed request class the API's handler takes (its ``request`` annotation), or None
    for a handler still taking kio's per-version dataclass."""
    return _REQUEST_TYPES[api_key]


def _annotated_request_type(handler: Handler) -> type[Any] | None:
    annotation = typing.get_type_hints(handler).get("request")
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return annotation
    return None


_REQUEST_TYPES = {
    api_key: _annotated_request_type(handler) for api_key, handler in HANDLERS.items()
}

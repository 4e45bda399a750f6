"""The one table from API key to handler."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from kshim.broker.context import RequestContext
from kshim.broker.handlers import (
    alter_configs,
    api_versions,
    create_partitions,
    create_topics,
    delete_records,
    delete_topics,
    describe_configs,
    fetch,
    find_coordinator,
    incremental_alter_configs,
    init_producer_id,
    list_offsets,
    metadata,
    produce,
)
from kshim.broker.versions import ADVERTISED
from kshim.protocol.fetch_response import Part

# A handler returns the response as a dict for the kio encoder, as already encoded
# body parts (Fetch), or None when no response is due (Produce with acks=0).
Handler = Callable[[Any, RequestContext], Awaitable[dict[str, Any] | list[Part] | None]]

HANDLERS: dict[int, Handler] = {
    0: produce.handle,
    1: fetch.handle,
    2: list_offsets.handle,
    3: metadata.handle,
    10: find_coordinator.handle,
    18: api_versions.handle,
    19: create_topics.handle,
    20: delete_topics.handle,
    21: delete_records.handle,
    22: init_producer_id.handle,
    32: describe_configs.handle,
    33: alter_configs.handle,
    37: create_partitions.handle,
    44: incremental_alter_configs.handle,
}

assert HANDLERS.keys() == ADVERTISED.keys(), "every advertised API needs a handler"

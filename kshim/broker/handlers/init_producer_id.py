"""InitProducerId (key 22): producer ids for idempotent producers.

A producer id comes from a durable LMDB counter, so it is never reused after
a restart. A request with a known id and epoch (v3+, KIP-360) bumps the epoch
so the client can reset its sequences after an error. Transactional ids are
not supported yet and are refused.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kshim.broker.context import RequestContext
from kshim.protocol.errors import ErrorCode

MAX_EPOCH = 32767
NO_PRODUCER = -1


async def handle(request: Any, context: RequestContext) -> dict[str, Any]:
    if request.transactional_id is not None:
        return _answer(ErrorCode.transactional_id_authorization_failed, NO_PRODUCER, -1)
    producer_id = getattr(request, "producer_id", NO_PRODUCER)
    epoch = getattr(request, "producer_epoch", -1)
    if producer_id != NO_PRODUCER and 0 <= epoch < MAX_EPOCH - 1:
        return _answer(ErrorCode.none, producer_id, epoch + 1)
    producer_id = await asyncio.to_thread(context.broker.metadata.allocate_producer_id)
    return _answer(ErrorCode.none, producer_id, 0)


def _answer(error: ErrorCode, producer_id: int, epoch: int) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "error_code": error,
        "producer_id": producer_id,
        "producer_epoch": epoch,
    }

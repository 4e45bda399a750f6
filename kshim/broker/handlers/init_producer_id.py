"""InitProducerId (key 22): producer ids for idempotent producers.

A producer id comes from a durable LMDB counter, so it is never reused after
a restart. A request with a known id and epoch (v3+, KIP-360) bumps the epoch
so the client can reset its sequences after an error. With a transactional
id the transaction coordinator answers: it keeps the id's producer id, bumps
its epoch (fencing older instances), and first decides a transaction the
previous instance left open, by review (broker/transactions/reviewer.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

from kshim.broker.context import RequestContext
from kshim.protocol.codec import milliseconds
from kshim.protocol.errors import ErrorCode
from kshim.storage.transaction_store import TransactionRecord

MAX_EPOCH = 32767
FIRST_FENCED_VERSION = 4  # KIP-588: older versions get INVALID_PRODUCER_EPOCH
NO_PRODUCER = -1


async def handle(request: Any, context: RequestContext) -> dict[str, Any]:
    producer_id = getattr(request, "producer_id", NO_PRODUCER)
    epoch = getattr(request, "producer_epoch", -1)
    if request.transactional_id is not None:
        broker = context.broker

        async def resolve(record: TransactionRecord) -> bool:
            return await broker.reviewer.resolve(record, "new producer instance")

        error, producer_id, epoch = await broker.transactions.init_producer(
            request.transactional_id,
            milliseconds(request.transaction_timeout),
            producer_id,
            epoch,
            resolve,
            fenced_code=context.version >= FIRST_FENCED_VERSION,
        )
        return _answer(error, producer_id, epoch)
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

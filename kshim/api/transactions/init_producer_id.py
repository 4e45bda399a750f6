"""InitProducerId (key 22): producer ids for idempotent and transactional producers.

A producer id comes from a durable LMDB counter, so it is never reused after
a restart. A request with a known id and epoch (v3+, KIP-360) bumps the epoch
so the client can reset its sequences after an error. With a transactional
id the transaction coordinator keeps the id's producer id, bumps its epoch
(fencing older instances), and first decides a transaction the previous
instance left open, by review (broker/transactions/reviewer.py).
"""

from __future__ import annotations

from kshim.api.context import RequestContext
from kshim.api.transactions.services import ProducerIds
from kshim.protocol.messages.init_producer_id import (
    InitProducerIdRequest,
    InitProducerIdResponse,
)

FIRST_FENCED_VERSION = 4  # KIP-588: older versions get INVALID_PRODUCER_EPOCH


async def handle(
    request: InitProducerIdRequest, context: RequestContext[ProducerIds]
) -> InitProducerIdResponse:
    broker = context.broker
    answer = await broker.transactions.init_producer(
        request.transactional_id,
        request.transaction_timeout_ms,
        request.producer_id,
        request.producer_epoch,
        broker.reviewer.resolve,
        fenced_code=context.version >= FIRST_FENCED_VERSION,
    )
    return InitProducerIdResponse(
        throttle_time_ms=0,
        error_code=answer.error,
        producer_id=answer.producer_id,
        producer_epoch=answer.producer_epoch,
    )

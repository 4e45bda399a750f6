"""The access rules of DescribeTransactions and ListTransactions
(KafkaApis.handleDescribeTransactionsRequest, handleListTransactionsRequest), loaded with
their routes at their first request (api/routes.py): transactions are described and
listed with DESCRIBE on their ids.
"""

from __future__ import annotations

import dataclasses

from kshim.api.access.permissions import Permissions
from kshim.api.access.refusals import split
from kshim.api.access.rule import Handler
from kshim.api.context import RequestContext
from kshim.protocol.acls import Operation
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    TransactionState,
)
from kshim.protocol.messages.list_transactions import (
    ListTransactionsRequest,
    ListTransactionsResponse,
)


async def describe_transactions_rule(
    request: DescribeTransactionsRequest,
    context: RequestContext,
    permissions: Permissions,
    handle: Handler[DescribeTransactionsRequest, DescribeTransactionsResponse],
) -> DescribeTransactionsResponse:
    """Each transactional id needs DESCRIBE, or it is TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    (every other field left at the schema's default); a described transaction lists only
    the topics the client may DESCRIBE."""
    allowed, refused = split(
        request.transactional_ids,
        lambda transactional_id: permissions.allows_transactional_id(
            Operation.DESCRIBE, transactional_id
        ),
    )
    states: list[TransactionState] = []
    if allowed:
        narrowed = dataclasses.replace(request, transactional_ids=allowed)
        states = (await handle(narrowed, context)).transaction_states
    for state in states:
        describable = permissions.topics(
            Operation.DESCRIBE, (topic.topic for topic in state.topics)
        )
        state.topics = [topic for topic in state.topics if topic.topic in describable]
    states.extend(
        TransactionState(
            error_code=ErrorCode.transactional_id_authorization_failed,
            transactional_id=transactional_id,
            transaction_state="",
            transaction_timeout_ms=0,
            transaction_start_time_ms=0,
            producer_id=0,
            producer_epoch=0,
            topics=[],
        )
        for transactional_id in refused
    )
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=states)


async def list_transactions_rule(
    request: ListTransactionsRequest,
    context: RequestContext,
    permissions: Permissions,
    handle: Handler[ListTransactionsRequest, ListTransactionsResponse],
) -> ListTransactionsResponse:
    """Only the transactional ids the client may DESCRIBE are listed."""
    response = await handle(request, context)
    response.transaction_states = [
        state
        for state in response.transaction_states
        if permissions.allows_transactional_id(Operation.DESCRIBE, state.transactional_id)
    ]
    return response

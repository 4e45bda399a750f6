"""DescribeUserScramCredentials (key 50, KIP-554): which SCRAM mechanisms each user has a
credential of, and their iteration counts; never a salt or a key.

No users named (null or empty) describes every user with a credential; an unknown user
gets RESOURCE_NOT_FOUND, a name given twice DUPLICATE_RESOURCE
(``security/credentials.py``). Who may ask (DESCRIBE on the cluster) is checked before the
handler runs. Kafka's ScramImage.describe sets no top-level error message, nor one for a
user described: the field's default, "", is sent.
"""

from __future__ import annotations

from kshim.api.context import RequestContext
from kshim.api.services import WithCredentials
from kshim.broker.security.credentials import UNSET_MESSAGE
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)


async def handle(
    request: DescribeUserScramCredentialsRequest, context: RequestContext[WithCredentials]
) -> DescribeUserScramCredentialsResponse:
    users = None if request.users is None else [user.name for user in request.users]
    return DescribeUserScramCredentialsResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.none,
        error_message=UNSET_MESSAGE,
        results=context.broker.credentials.describe(users),
    )

"""AlterUserScramCredentials (key 51, KIP-554): set and delete users' SCRAM credentials.

An upsertion carries the salt and the salted password the client computed, never the
password; the broker keeps StoredKey and ServerKey made from it. One result per user; a
user named twice gets DUPLICATE_RESOURCE, and the changes that pass are written together
(``security/credentials.py``). Who may ask (ALTER on the cluster) is checked before the
handler runs.
"""

from __future__ import annotations

from kshim.api.context import RequestContext
from kshim.api.services import WithCredentials
from kshim.protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
)


async def handle(
    request: AlterUserScramCredentialsRequest, context: RequestContext[WithCredentials]
) -> AlterUserScramCredentialsResponse:
    results = await context.broker.credentials.alter(request.deletions, request.upsertions)
    return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=results)

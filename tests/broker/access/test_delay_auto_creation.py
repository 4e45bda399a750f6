"""Naming ``T.delay`` of no ``T`` auto-creates ``T``: where ACLs apply, only for a client
that may create ``T`` (CREATE on the cluster or on ``T``), as for naming ``T`` itself."""

from __future__ import annotations

from kshim.broker.broker import Broker
from kshim.protocol.acls import Operation, PatternType
from kshim.protocol.errors import ErrorCode
from kshim.protocol.metadata_request import MetadataRequest
from tests.broker.access.support import call, grant_topic

METADATA, METADATA_VERSION = 3, 12
TAF = ErrorCode.topic_authorization_failed


async def metadata(broker: Broker, *names: str) -> list[tuple[str, int]]:
    request = MetadataRequest(topics=names, allow_auto_topic_creation=True)
    answer = await call(broker, METADATA, METADATA_VERSION, request)
    return [(topic.name, int(topic.error_code)) for topic in answer.topics]


async def test_naming_a_new_topics_companion_needs_create_on_the_topic(broker: Broker) -> None:
    grant_topic(broker, "new", Operation.DESCRIBE, pattern=PatternType.PREFIXED)
    assert await metadata(broker, "new-1.delay") == [("new-1.delay", TAF)]
    assert broker.resolver.resolve("new-1") is None
    assert broker.resolver.resolve("new-1.delay") is None
    grant_topic(broker, "new-1", Operation.CREATE)  # T's ACL, not one for T.delay
    assert await metadata(broker, "new-1.delay") == [("new-1.delay", 0)]
    assert broker.resolver.resolve("new-1") is not None

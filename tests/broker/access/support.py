"""A broker with ACLs on, over the in-memory log store, and requests sent through the
route table (so through each API's access rule) as a given principal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kshim.api.context import RequestContext
from kshim.api.routes import ROUTES
from kshim.broker.broker import Broker
from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.security.session import Session
from kshim.protocol.acls import (
    CLUSTER_NAME,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from kshim.protocol.headers import RequestHeader
from kshim.protocol.produce_request import PartitionData, ProduceRequest, TopicData
from kshim.protocol.records import BatchSpec, Record, build_batch
from kshim.storage.log.memory_log import MemoryLogStore
from tests.broker.handler_calls import decoded

NOW_MS = 1_700_000_000_000
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ALICE = "User:alice"
BOB = "User:bob"
ADMIN = "User:admin"  # a super user
HOST = "10.0.0.7"
TOPIC = "orders"
OTHER = "payments"
GROUP = "billing"
PLAIN = BatchSpec()


def clock() -> int:
    return NOW_MS


async def open_broker(path: Path, **settings: str) -> Broker:
    values = {
        "log.dirs": str(path),
        "kshim.full.view.process": "false",
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": ADMIN,
        **settings,
    }
    broker = Broker(BrokerConfig.load([values]), clock=clock, logs=MemoryLogStore(clock))
    await broker.start()
    return broker


def grant(
    broker: Broker,
    resource_type: ResourceType,
    name: str,
    *operations: Operation,
    principal: str = ALICE,
    pattern: PatternType = PatternType.LITERAL,
    permission: Permission = Permission.ALLOW,
    host: str = "*",
) -> None:
    """Adds one ACL per operation (DENY ones with ``permission``)."""
    bindings = [
        AclBinding(resource_type, name, pattern, principal, host, operation, permission)
        for operation in operations
    ]
    results = broker.acls.create(bindings)
    assert all(code == 0 for code, _ in results), results


def grant_topic(broker: Broker, name: str, *operations: Operation, **options: Any) -> None:
    grant(broker, ResourceType.TOPIC, name, *operations, **options)


def grant_group(broker: Broker, name: str, *operations: Operation, **options: Any) -> None:
    grant(broker, ResourceType.GROUP, name, *operations, **options)


def grant_cluster(broker: Broker, *operations: Operation, **options: Any) -> None:
    grant(broker, ResourceType.CLUSTER, CLUSTER_NAME, *operations, **options)


def grant_transactional_id(
    broker: Broker, name: str, *operations: Operation, **options: Any
) -> None:
    grant(broker, ResourceType.TRANSACTIONAL_ID, name, *operations, **options)


def context(
    broker: Broker, api_key: int, version: int, principal: str = ALICE, host: str = HOST
) -> RequestContext:
    header = RequestHeader(api_key, version, 7, "access-test")
    return RequestContext(header, broker, session=Session(principal=principal, client_address=host))


async def call(
    broker: Broker,
    api_key: int,
    version: int,
    request: object,
    principal: str = ALICE,
    host: str = HOST,
) -> Any:
    """The answer of the route table's route for ``api_key`` (the handler behind its access
    rule) to ``request`` sent by ``principal`` from ``host``; encoded answers are read back
    with kio."""
    route = ROUTES[api_key]
    answer = await route.handle(request, context(broker, api_key, version, principal, host))
    if isinstance(answer, list):
        return decoded(api_key, version, answer)
    return answer


def produce_request(
    *topics: str,
    partition: int = 0,
    spec: BatchSpec = PLAIN,
    transactional_id: str | None = None,
    acks: int = -1,
) -> ProduceRequest:
    """One batch of one record to ``partition`` of each topic."""
    batch = memoryview(build_batch([Record(0, NOW_MS, b"k", b"v")], spec))
    topic_data = tuple(TopicData(name, (PartitionData(partition, batch),)) for name in topics)
    return ProduceRequest(transactional_id, acks, 5000, topic_data)


def errors_by_topic(
    topics: Any, partitions: str = "partitions", error: str = "error_code"
) -> dict[str, list[int]]:
    """Each topic's partitions' error codes, by topic name (the field names differ by API)."""
    return {
        _name(topic): [int(getattr(partition, error)) for partition in getattr(topic, partitions)]
        for topic in topics
    }


def _name(topic: Any) -> str:
    return str(getattr(topic, "name", None) or getattr(topic, "topic", None))

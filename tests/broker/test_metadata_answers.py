"""Metadata answers over the in-memory store: byte for byte what the typed path writes,
in every served version, and each topic's kept entry following the topic's changes.

The expected answers are typed responses built here from the resolver, encoded by kio
(``messages/serial.py``): how the handler answered before it kept entries encoded.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from kio.serial import entity_reader

from kshim.api.context import RequestContext
from kshim.api.records import metadata
from kshim.broker import topic_descriptions
from kshim.broker.broker import Broker
from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.topic_descriptions import TopicDescriptions
from kshim.broker.topic_resolver import NO_TOPIC_ID, ResolvedTopic
from kshim.protocol import codec
from kshim.protocol.apis import served_versions
from kshim.protocol.errors import ErrorCode
from kshim.protocol.fetch_response import Part
from kshim.protocol.headers import RequestHeader
from kshim.protocol.messages import serial
from kshim.protocol.messages.metadata import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from kshim.protocol.metadata_request import MetadataRequest
from kshim.protocol.metadata_response import encode_topic
from kshim.storage.log.memory_log import MemoryLogStore

METADATA_KEY = 3
VERSIONS = [version for key, version in served_versions() if key == METADATA_KEY]
NODE_ID, HOST, PORT, CLUSTER = 1, "127.0.0.1", 9092, "test-cluster"
FIRST_NULLABLE_NAME = 12


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    """Topics ``orders`` (3 partitions, with its view) and ``plain`` (no view)."""
    settings = {
        "log.dirs": str(tmp_path),
        "kshim.full.view.process": "false",
        "listeners": f"PLAINTEXT://{HOST}:{PORT}",
        "cluster.id": CLUSTER,
        "node.id": str(NODE_ID),
    }
    broker = Broker(BrokerConfig.load([settings]), logs=MemoryLogStore(lambda: 0))
    await broker.start()
    await broker.topics.create("orders", 3, {})
    await broker.topics.create("plain", 1, {"kshim.full.view": "false"})
    yield broker
    await broker.close()


async def answer(broker: Broker, version: int, request: MetadataRequest) -> bytes:
    context = RequestContext(RequestHeader(METADATA_KEY, version, 7, "unit-test"), broker)
    parts: list[Part] = await metadata.handle(request, context)
    return b"".join(bytes(part) for part in parts)  # type: ignore[arg-type]


def typed_answer(
    broker: Broker, entries: Sequence[tuple[str | None, ErrorCode]]
) -> MetadataResponse:
    """The typed response listing ``entries`` (name, error): topics as the resolver has
    them, error entries with the zero topic id and no partitions."""
    topics = []
    for name, error_code in entries:
        resolved = None if name is None else broker.resolver.resolve(name)
        if error_code != ErrorCode.none or resolved is None:
            topics.append(
                MetadataResponseTopic(
                    error_code=error_code, name=name, topic_id=NO_TOPIC_ID, partitions=[]
                )
            )
            continue
        partitions = [
            MetadataResponsePartition(
                error_code=ErrorCode.none,
                partition_index=index,
                leader_id=NODE_ID,
                leader_epoch=0,
                replica_nodes=[NODE_ID],
                isr_nodes=[NODE_ID],
            )
            for index in range(resolved.partition_count)
        ]
        topics.append(
            MetadataResponseTopic(
                error_code=ErrorCode.none,
                name=name,
                topic_id=resolved.topic_id,
                partitions=partitions,
            )
        )
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[MetadataResponseBroker(node_id=NODE_ID, host=HOST, port=PORT)],
        cluster_id=CLUSTER,
        controller_id=NODE_ID,
        topics=topics,
    )


def typed_bytes(
    broker: Broker, version: int, entries: Sequence[tuple[str | None, ErrorCode]]
) -> bytes:
    return serial.encode_response(METADATA_KEY, version, typed_answer(broker, entries))


def decoded(version: int, body: bytes) -> Any:
    response, size = entity_reader(codec.response_class(METADATA_KEY, version))(memoryview(body), 0)
    assert size == len(body)
    return response


# Stored topics only: a view is answered when named, never listed (api/records/metadata.py).
EVERY_TOPIC = [
    ("orders", ErrorCode.none),
    ("plain", ErrorCode.none),
]


@pytest.mark.parametrize("version", VERSIONS)
async def test_every_topic_as_the_typed_path_answers(broker: Broker, version: int) -> None:
    """A null topic list, or in v0 an empty one, asks for every topic: views are left out,
    so that pattern subscriptions do not match them."""
    request = MetadataRequest(() if version == 0 else None)
    assert await answer(broker, version, request) == typed_bytes(broker, version, EVERY_TOPIC)
    # The second answer comes from the kept entries.
    assert await answer(broker, version, request) == typed_bytes(broker, version, EVERY_TOPIC)


@pytest.mark.parametrize("version", VERSIONS)
async def test_named_topics_as_the_typed_path_answers(broker: Broker, version: int) -> None:
    """Topics, views, unknown and illegal names, in the order asked; a repeated name is
    answered once, as Kafka answers the set of names asked for."""
    asked = [
        ("plain", ErrorCode.none),
        ("nope", ErrorCode.unknown_topic_or_partition),
        ("orders.full", ErrorCode.none),
        ("bad name!", ErrorCode.invalid_topic_exception),
        ("plain.full", ErrorCode.unknown_topic_or_partition),  # plain has no view
        ("orders", ErrorCode.none),
    ]
    names = (*(name for name, _ in asked), "plain", "orders.full")
    request = MetadataRequest(names, allow_auto_topic_creation=False)
    assert await answer(broker, version, request) == typed_bytes(broker, version, asked)


@pytest.mark.parametrize("version", VERSIONS)
async def test_auto_created_topics_as_the_typed_path_answers(broker: Broker, version: int) -> None:
    """Auto-creation (implied before v4) makes the topic, with num.partitions partitions;
    a view's name is never created, nor an illegal one."""
    fresh = f"fresh-{version}"
    asked = [
        (fresh, ErrorCode.none),
        ("plain.full", ErrorCode.unknown_topic_or_partition),
        ("bad name!", ErrorCode.invalid_topic_exception),
    ]
    request = MetadataRequest(tuple(name for name, _ in asked), allow_auto_topic_creation=True)
    body = await answer(broker, version, request)
    assert broker.resolver.resolve(fresh) is not None
    assert body == typed_bytes(broker, version, asked)
    assert len(decoded(version, body).topics[0].partitions) == 1


async def test_v12_asks_by_id_when_an_id_is_given(broker: Broker) -> None:
    """Kafka 3.9 (compat_tests/test_metadata_topic_ids.py): names are then ignored, each
    id answered once, the unknown ones first with a null name; a view has no id to ask by."""
    orders = broker.resolver.resolve("orders")
    assert orders is not None
    unknown = uuid.UUID(int=5)
    ids = (unknown.bytes, orders.topic_id.bytes, bytes(16), unknown.bytes)
    request = MetadataRequest(("plain", None, "plain", None), topic_ids=ids)

    expected = typed_answer(
        broker, [(None, ErrorCode.unknown_topic_id), ("orders", ErrorCode.none)]
    )
    expected.topics[0].topic_id = unknown
    assert await answer(broker, 12, request) == serial.encode_response(METADATA_KEY, 12, expected)


async def test_v12_answers_a_null_name_without_an_id_as_kafka_fails_on_it(
    broker: Broker,
) -> None:
    request = MetadataRequest(("orders", None))
    assert decoded(12, await answer(broker, 12, request)) == error_response(
        12, [("orders", NO_TOPIC_ID), ("", NO_TOPIC_ID)], ErrorCode.unknown_server_error
    )


@pytest.mark.parametrize("version", [10, 11])
async def test_v10_and_v11_refuse_topic_ids_and_null_names(broker: Broker, version: int) -> None:
    """Kafka looks topics up by id from v12 only: any id or null name before that is an
    INVALID_REQUEST for every topic, in Kafka's error response (no brokers, no cluster)."""
    some_id = uuid.UUID(int=9)
    by_id = MetadataRequest(("orders", "plain"), topic_ids=(bytes(16), some_id.bytes))
    null_name = MetadataRequest(("orders", None))

    assert decoded(version, await answer(broker, version, by_id)) == error_response(
        version, [("orders", NO_TOPIC_ID), ("plain", some_id)], ErrorCode.invalid_request
    )
    assert decoded(version, await answer(broker, version, null_name)) == error_response(
        version, [("orders", NO_TOPIC_ID), ("", NO_TOPIC_ID)], ErrorCode.invalid_request
    )


def error_response(version: int, topics: Sequence[tuple[str, uuid.UUID]], code: ErrorCode) -> Any:
    """Kafka's MetadataRequest.getErrorResponse, decoded as a client reads it."""
    response = MetadataResponse(
        throttle_time_ms=0,
        brokers=[],
        cluster_id=None,
        controller_id=-1,
        topics=[
            MetadataResponseTopic(error_code=code, name=name, topic_id=topic_id, partitions=[])
            for name, topic_id in topics
        ],
    )
    return decoded(version, serial.encode_response(METADATA_KEY, version, response))


async def test_an_entry_is_encoded_once_per_version(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    described: list[str] = []
    describe = topic_descriptions.describe

    def counting(topic: Any, node_id: int) -> MetadataResponseTopic:
        described.append(topic.name)
        return describe(topic, node_id)

    monkeypatch.setattr(topic_descriptions, "describe", counting)
    for _ in range(3):
        await answer(broker, 12, MetadataRequest(None))
        await answer(broker, 12, MetadataRequest(("orders.full", "orders", "plain")))
    assert sorted(described) == ["orders", "orders.full", "plain"]
    await answer(broker, 1, MetadataRequest(("orders",)))
    assert described[3:] == ["orders"]


async def test_added_partitions_are_answered_at_once(broker: Broker) -> None:
    await answer(broker, 12, MetadataRequest(None))
    await broker.topics.add_partitions("orders", 5)
    body = await answer(broker, 12, MetadataRequest(None))
    assert body == typed_bytes(broker, 12, EVERY_TOPIC)
    counts = {topic.name: len(topic.partitions) for topic in decoded(12, body).topics}
    assert counts == {"orders": 5, "plain": 1}
    [view] = decoded(12, await answer(broker, 12, MetadataRequest(("orders.full",)))).topics
    assert len(view.partitions) == 5


async def test_a_recreated_topic_is_answered_with_its_new_id(broker: Broker) -> None:
    before = decoded(12, await answer(broker, 12, MetadataRequest(("plain",)))).topics[0]
    await broker.topics.delete("plain")
    gone = decoded(12, await answer(broker, 12, MetadataRequest(("plain",), False))).topics[0]
    assert gone.error_code == ErrorCode.unknown_topic_or_partition
    await broker.topics.create("plain", 2, {})
    after = decoded(12, await answer(broker, 12, MetadataRequest(("plain",)))).topics[0]
    assert after.topic_id != before.topic_id
    assert len(after.partitions) == 2


async def test_a_view_turned_off_is_no_longer_answered(broker: Broker) -> None:
    asked = MetadataRequest(("orders.full",), allow_auto_topic_creation=False)
    [view] = decoded(12, await answer(broker, 12, asked)).topics
    assert view.error_code == ErrorCode.none
    await broker.topics.set_configs("orders", {"kshim.full.view": "false"})
    body = await answer(broker, 12, MetadataRequest(None))
    assert [topic.name for topic in decoded(12, body).topics] == ["orders", "plain"]
    [view] = decoded(12, await answer(broker, 12, asked)).topics
    assert view.error_code == ErrorCode.unknown_topic_or_partition


@pytest.mark.parametrize("version", VERSIONS)
async def test_views_are_named_not_listed(broker: Broker, version: int) -> None:
    """Every client's pattern subscription matches the all-topics answer, so a view listed
    there would be read twice by ``orders.*``; asked for by name it is answered, not
    internal (Spark drops internal topics even when named)."""
    request = MetadataRequest(() if version == 0 else None)
    listed = [
        topic.name for topic in decoded(version, await answer(broker, version, request)).topics
    ]
    assert listed == ["orders", "plain"]
    named = MetadataRequest(("orders.full",), allow_auto_topic_creation=False)
    [view] = decoded(version, await answer(broker, version, named)).topics
    assert (view.name, view.error_code, len(view.partitions)) == ("orders.full", ErrorCode.none, 3)
    if version >= 1:
        assert view.is_internal is False


def topics_and_views(broker: Broker) -> list[ResolvedTopic]:
    """Every stored topic, each followed by its view when it has one: every name a
    client may ask for, as Metadata requests naming them all would."""
    found = []
    for topic in broker.resolver.listed():
        found.append(topic)
        view = broker.resolver.resolve(topic.name + ".full")
        if view is not None:
            found.append(view)
    return found


async def test_entries_of_deleted_topics_are_swept(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a version's table holds more entries than names can be current (two per
    stored topic) plus the allowance, those of names that no longer resolve go, even in
    the middle of filling the table."""
    monkeypatch.setattr(topic_descriptions, "STALE_ALLOWANCE", 2)
    descriptions = TopicDescriptions(broker.resolver, broker.topics)
    short_lived = [f"short-lived-{index}" for index in range(4)]
    for name in short_lived:
        await broker.topics.create(name, 1, {})
    descriptions.entries(topics_and_views(broker), NODE_ID, 12)
    assert len(descriptions) == 3 + 2 * len(short_lived)  # each with its view
    for name in short_lived:
        await broker.topics.delete(name)
    descriptions.entries(topics_and_views(broker), NODE_ID, 12)
    assert len(descriptions) == 11  # nothing new was kept, so nothing was swept
    for name in ("late-1", "late-2"):
        await broker.topics.create(name, 1, {"kshim.full.view": "false"})
    # late-1 makes 12 entries, over 2 x 4 stored topics + 2: the sweep leaves 4, and
    # late-2 joins them.
    listed = topics_and_views(broker)
    entries = descriptions.entries(listed, NODE_ID, 12)
    assert len(descriptions) == 5
    assert entries == [
        encode_topic(12, topic_descriptions.describe(topic, NODE_ID)) for topic in listed
    ]

"""Topic edge cases: empty topics, deleted topics, unknown topics, auto-created topics."""

from __future__ import annotations

import time

import pytest

from compat_tests.brokers import BrokerUnderTest
from compat_tests.clients import SHORT_WAIT_S, AdminDriver, client_params, text_records
from compat_tests.deviations import (
    TANSU_AUTO_CREATE_PARTITIONS,
    TANSU_TIMESTAMP_LOOKUP,
    deviates,
)
from compat_tests.driver_kcat import KcatDriver, KcatError
from compat_tests.drivers import admin_driver, driver
from compat_tests.support import (
    TOPIC_ALREADY_EXISTS,
    UNKNOWN_TOPIC_OR_PARTITION,
    create_topic,
    reference,
    require_client,
    topic_name,
)
from kshim.client.wire import WireConnection
from tests.e2e.client_helpers import expected_records, timestamp_of

pytestmark = pytest.mark.timeout(120)

ADMINS = ("kafka-python", "aiokafka", "confluent")
METADATA_KEY, METADATA_VERSION = 3, 12
RECREATE_DEADLINE_S = 10.0  # Kafka deletes asynchronously; a re-create may race it


@pytest.mark.compat_smoke
@pytest.mark.empty_topic
@deviates(TANSU_TIMESTAMP_LOOKUP, client=("kafka-python", "aiokafka", "confluent"))
@pytest.mark.parametrize("client", client_params("kafka-python", "aiokafka", "confluent", "kcat"))
def test_empty_topic(broker: BrokerUnderTest, client: str) -> None:
    """No records: earliest = latest = 0, a read returns nothing, no offset for any time."""
    require_client(client)
    topic = create_topic(broker, f"empty-{client}")
    reader = driver(client)

    assert reader.watermarks(broker.bootstrap, topic) == (0, 0)
    assert reader.consume(broker.bootstrap, topic, 1, wait_s=SHORT_WAIT_S) == []
    assert reader.offset_for_time(broker.bootstrap, topic, timestamp_of(0)) is None


@pytest.mark.deleted_topic
@pytest.mark.admin
@pytest.mark.parametrize("client", client_params(*ADMINS))
def test_topic_lifecycle_and_recreation(broker: BrokerUnderTest, client: str) -> None:
    """Create, create again (TOPIC_ALREADY_EXISTS), delete, delete again (unknown), and a
    topic re-created under the same name starts empty, at offset 0."""
    admin = admin_driver(client)
    topic = topic_name(f"lifecycle-{client}")
    assert admin.create_topic(broker.bootstrap, topic, 2) == 0
    assert admin.partitions(broker.bootstrap, topic) == [0, 1]
    assert admin.create_topic(broker.bootstrap, topic) == TOPIC_ALREADY_EXISTS
    records = text_records(3)
    assert reference().produce(broker.bootstrap, topic, [records]) == [0, 1, 2]

    assert admin.delete_topic(broker.bootstrap, topic) == 0
    assert topic not in admin.list_topics(broker.bootstrap)
    assert admin.delete_topic(broker.bootstrap, topic) == UNKNOWN_TOPIC_OR_PARTITION

    assert recreate(admin, broker, topic) == 0
    assert reference().watermarks(broker.bootstrap, topic) == (0, 0)
    assert reference().produce(broker.bootstrap, topic, [records[:1]]) == [0]
    assert reference().consume(broker.bootstrap, topic, 1) == expected_records(records[:1])


def recreate(admin: AdminDriver, broker: BrokerUnderTest, topic: str) -> int:
    """CreateTopics until the deletion has finished (bounded); returns the last error code."""
    deadline = time.monotonic() + RECREATE_DEADLINE_S
    while True:
        code = admin.create_topic(broker.bootstrap, topic)
        if code != TOPIC_ALREADY_EXISTS or time.monotonic() > deadline:
            return code
        time.sleep(0.2)


@pytest.mark.compat_smoke
@pytest.mark.unknown_topic
@pytest.mark.wire
def test_metadata_for_an_unknown_topic_without_auto_creation(broker: BrokerUnderTest) -> None:
    topic = topic_name("unknown-metadata")
    request = {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
    with WireConnection(broker.host, broker.port) as connection:
        response = connection.call(METADATA_KEY, METADATA_VERSION, request)

    [answer] = response.topics
    assert (answer.name, int(answer.error_code), answer.partitions) == (
        topic,
        UNKNOWN_TOPIC_OR_PARTITION,
        (),
    )
    assert topic not in reference().list_topics(broker.bootstrap)


# Whether a consumer's Metadata request asks for auto-creation: kafka-python and aiokafka do
# (allow_auto_create_topics defaults to true, as in the Java consumer), librdkafka does not
# (allow.auto.create.topics=false), and kcat then reports the unknown topic.
CONSUMER_CREATES_TOPIC = {"kafka-python": True, "aiokafka": True, "confluent": False}


@pytest.mark.unknown_topic
@deviates(TANSU_AUTO_CREATE_PARTITIONS, client=("kafka-python", "aiokafka"))
@pytest.mark.parametrize("client", client_params("kafka-python", "aiokafka", "confluent", "kcat"))
def test_consumer_of_an_unknown_topic(broker: BrokerUnderTest, client: str) -> None:
    """A read returns nothing; the topic exists afterwards only if the client asked for
    auto-creation, and then with num.partitions (1) partitions."""
    require_client(client)
    topic = topic_name(f"unknown-{client}")
    reader = driver(client)
    if isinstance(reader, KcatDriver):
        with pytest.raises(KcatError, match="Unknown topic or partition"):
            reader.consume(broker.bootstrap, topic, 1, wait_s=SHORT_WAIT_S)
    else:
        assert reader.consume(broker.bootstrap, topic, 1, wait_s=SHORT_WAIT_S) == []
    if CONSUMER_CREATES_TOPIC.get(client, False):
        assert reference().partitions(broker.bootstrap, topic) == [0]
    else:
        assert topic not in reference().list_topics(broker.bootstrap)


@pytest.mark.unknown_topic
@pytest.mark.producer_plain
@deviates(TANSU_AUTO_CREATE_PARTITIONS)
@pytest.mark.parametrize("client", client_params("kafka-python", "confluent", "kcat"))
def test_producing_to_an_unknown_topic_creates_it(broker: BrokerUnderTest, client: str) -> None:
    """auto.create.topics.enable (Kafka's default: true) with num.partitions (default 1)."""
    require_client(client)
    topic = topic_name(f"auto-{client}")
    records = text_records(4)

    driver(client).produce(broker.bootstrap, topic, [records])

    assert reference().partitions(broker.bootstrap, topic) == [0]
    consumed = reference().consume(broker.bootstrap, topic, len(records))
    assert [(r.offset, r.key, r.value) for r in consumed] == [
        (offset, r.key, r.value) for offset, r in enumerate(records)
    ]

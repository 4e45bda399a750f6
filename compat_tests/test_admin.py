"""Admin role x client: configs, partitions, list offsets, delete records.

Topic create/delete is in test_topics.py; list/describe groups in test_groups.py.
"""

from __future__ import annotations

import pytest

from compat_tests.brokers import BrokerUnderTest
from compat_tests.clients import admin_client_params, client_params
from compat_tests.deviations import (
    TANSU_DELETE_RECORDS_V2,
    TANSU_DESCRIBE_CONFIGS_DEFAULTS,
    TANSU_LATEST_OFFSET,
    TANSU_NO_ALTER_CONFIGS,
    TANSU_NO_CREATE_PARTITIONS,
    deviates,
)
from compat_tests.drivers import admin_driver, driver
from compat_tests.support import RECORD_COUNT, create_topic, halves, reference, require_client
from tests.e2e.client_helpers import expected_records, sample_records

pytestmark = pytest.mark.timeout(120)

DEFAULT_RETENTION_MS = str(7 * 24 * 3600 * 1000)
DELETE_BEFORE = 4


@pytest.mark.admin
@deviates(TANSU_NO_ALTER_CONFIGS, client="aiokafka")
@deviates(TANSU_DESCRIBE_CONFIGS_DEFAULTS, client=("kafka-python", "confluent"))
@pytest.mark.parametrize("client", admin_client_params())
def test_describe_and_alter_topic_configs(broker: BrokerUnderTest, client: str) -> None:
    """DescribeConfigs shows a creation-time override and the defaults; altering one key
    keeps the other override with IncrementalAlterConfigs, and resets it with aiokafka's
    legacy AlterConfigs, which replaces the whole set of overrides (Kafka's semantics)."""
    topic = create_topic(broker, f"configs-{client}", configs={"retention.ms": "3600000"})
    admin = admin_driver(client)

    before = admin.topic_configs(broker.bootstrap, topic)
    admin.set_topic_config(broker.bootstrap, topic, "max.message.bytes", "2000000")
    after = admin.topic_configs(broker.bootstrap, topic)

    assert (before["retention.ms"], before["cleanup.policy"]) == ("3600000", "delete")
    assert before["max.message.bytes"] == "1048588"
    assert after["max.message.bytes"] == "2000000"
    legacy = client == "aiokafka"
    assert after["retention.ms"] == (DEFAULT_RETENTION_MS if legacy else "3600000")


@pytest.mark.admin
@deviates(TANSU_NO_CREATE_PARTITIONS)
@pytest.mark.parametrize("client", admin_client_params())
def test_create_partitions(broker: BrokerUnderTest, client: str) -> None:
    """CreatePartitions to 3; the new partitions take records from offset 0."""
    topic = create_topic(broker, f"partitions-{client}")
    admin = admin_driver(client)

    admin.add_partitions(broker.bootstrap, topic, 3)

    assert admin.partitions(broker.bootstrap, topic) == [0, 1, 2]
    records = sample_records(2)
    assert reference().produce(broker.bootstrap, topic, [records], partition=2) == [0, 1]
    assert reference().consume(broker.bootstrap, topic, 2, partition=2) == expected_records(records)


@pytest.mark.compat_smoke
@pytest.mark.admin
@deviates(TANSU_LATEST_OFFSET, client=("kafka-python", "aiokafka", "confluent", "kcat"))
@pytest.mark.parametrize("client", client_params("kafka-python", "aiokafka", "confluent", "kcat"))
def test_list_offsets_earliest_and_latest(broker: BrokerUnderTest, client: str) -> None:
    """After two multi-record batches, latest is the high watermark (12), not the start of
    the last batch plus one."""
    require_client(client)
    topic = create_topic(broker, f"watermarks-{client}")
    records = sample_records(RECORD_COUNT)
    assert reference().produce(broker.bootstrap, topic, halves(records)) == list(
        range(RECORD_COUNT)
    )

    assert driver(client).watermarks(broker.bootstrap, topic) == (0, RECORD_COUNT)


@pytest.mark.admin
@deviates(TANSU_DELETE_RECORDS_V2)
@pytest.mark.parametrize("client", admin_client_params())
def test_delete_records(broker: BrokerUnderTest, client: str) -> None:
    """DeleteRecords moves the log start: earliest becomes 4, reads start there."""
    topic = create_topic(broker, f"delete-records-{client}")
    records = sample_records(10)
    assert reference().produce(broker.bootstrap, topic, [records]) == list(range(10))

    low_watermark = admin_driver(client).delete_records(broker.bootstrap, topic, DELETE_BEFORE)

    assert low_watermark == DELETE_BEFORE
    assert reference().watermarks(broker.bootstrap, topic) == (DELETE_BEFORE, 10)
    remaining = reference().consume(broker.bootstrap, topic, 10 - DELETE_BEFORE)
    assert remaining == expected_records(records)[DELETE_BEFORE:]

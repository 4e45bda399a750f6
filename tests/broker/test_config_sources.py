"""Where a topic's config value comes from, as CreateTopics (v5+) and DescribeConfigs say:
set on the topic (DYNAMIC_TOPIC_CONFIG), set in the broker's configuration under the
broker key (STATIC_BROKER_CONFIG), or the broker key's default (DEFAULT_CONFIG), with the
synonyms in that order, as Kafka's ConfigHelper lists them (checked against Kafka 3.9 by
compat_tests/test_protocol_conformance.py, whose Kafka sets log.segment.bytes)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kshim.broker.broker import Broker
from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.config.describe import (
    DEFAULT_CONFIG,
    DYNAMIC_TOPIC_CONFIG,
    STATIC_BROKER_CONFIG,
)
from kshim.broker.config.keys import BROKER_DEFAULTS
from kshim.testing import FakeClock
from tests.groups.wire import call

CREATE_TOPICS, DESCRIBE_CONFIGS = 19, 32
TOPIC_RESOURCE = 2
SEGMENT_BYTES = "1048576"  # not the default, so that the two synonyms differ


async def started(data_dir: Path, settings: dict[str, str]) -> Broker:
    config = {"log.dirs": str(data_dir), "kshim.full.view.process": "false", **settings}
    broker = Broker(BrokerConfig.load([config]), clock=FakeClock())
    await broker.start()
    return broker


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    broker = await started(tmp_path, {"log.segment.bytes": SEGMENT_BYTES})
    yield broker
    await broker.close()


async def create(broker: Broker) -> dict[str, Any]:
    topic = {
        "name": "t",
        "num_partitions": 1,
        "replication_factor": 1,
        "configs": [{"name": "retention.ms", "value": "5000"}],
    }
    [created] = (await call(broker, CREATE_TOPICS, 7, {"topics": [topic]})).topics
    return {config.name: (config.value, config.config_source) for config in created.configs}


async def test_create_topics_says_which_broker_setting_a_default_comes_from(
    broker: Broker,
) -> None:
    sources = await create(broker)

    assert sources["segment.bytes"] == (SEGMENT_BYTES, STATIC_BROKER_CONFIG)
    assert sources["retention.ms"] == ("5000", DYNAMIC_TOPIC_CONFIG)
    assert sources["cleanup.policy"] == ("delete", DEFAULT_CONFIG)


async def test_describe_configs_lists_the_synonyms_in_force_first(broker: Broker) -> None:
    await create(broker)
    keys = ["segment.bytes", "retention.ms", "cleanup.policy"]
    request = {
        "resources": [
            {"resource_type": TOPIC_RESOURCE, "resource_name": "t", "configuration_keys": keys}
        ],
        "include_synonyms": True,
    }
    [result] = (await call(broker, DESCRIBE_CONFIGS, 4, request)).results

    described = {
        config.name: (config.config_source, [(s.name, s.value, s.source) for s in config.synonyms])
        for config in result.configs
    }
    default_segment = BROKER_DEFAULTS["log.segment.bytes"]
    assert described["segment.bytes"] == (
        STATIC_BROKER_CONFIG,
        [
            ("log.segment.bytes", SEGMENT_BYTES, STATIC_BROKER_CONFIG),
            ("log.segment.bytes", default_segment, DEFAULT_CONFIG),
        ],
    )
    assert described["retention.ms"] == (
        DYNAMIC_TOPIC_CONFIG,
        [
            ("retention.ms", "5000", DYNAMIC_TOPIC_CONFIG),
            ("log.retention.ms", BROKER_DEFAULTS["log.retention.ms"], DEFAULT_CONFIG),
        ],
    )
    assert described["cleanup.policy"] == (
        DEFAULT_CONFIG,
        [("log.cleanup.policy", "delete", DEFAULT_CONFIG)],
    )


async def test_a_default_the_broker_does_not_set_is_the_default(tmp_path: Path) -> None:
    broker = await started(tmp_path, {})
    try:
        sources = await create(broker)
    finally:
        await broker.close()

    assert sources["segment.bytes"] == (BROKER_DEFAULTS["log.segment.bytes"], DEFAULT_CONFIG)

"""Fixtures: a group coordinator over a fake clock and a real LMDB store in tmp_path, and a
whole broker in tmp_path for the tests that go through the handlers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from kshim.broker.broker import Broker
from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.groups.coordinator import GroupCoordinator
from kshim.broker.groups.settings import GroupSettings
from kshim.storage.meta.metadata import MetadataStore
from kshim.testing import FakeClock
from tests.groups.support import TOPIC


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def metadata(tmp_path: Path) -> Iterator[MetadataStore]:
    store = MetadataStore(str(tmp_path / "meta"))
    yield store
    store.close()


@pytest.fixture
def coordinator(clock: FakeClock, metadata: MetadataStore) -> GroupCoordinator:
    """No initial rebalance delay, so a lone member's join completes at once."""
    return GroupCoordinator(GroupSettings(), clock, metadata.committed_offsets)


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    """A started broker with a two-partition topic TOPIC; a lone member's join completes at once."""
    config = BrokerConfig.load(
        [{"log.dirs": str(tmp_path / "data"), "group.initial.rebalance.delay.ms": "0"}]
    )
    broker = Broker(config)
    await broker.start()
    await broker.topics.create(TOPIC, 2, {})
    yield broker
    await broker.close()

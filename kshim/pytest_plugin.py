"""pytest fixtures (loaded with ``-p kshim.pytest_plugin``): real brokers on loopback ports."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kshim.testing import BrokerProcess


@pytest.fixture(scope="session")
def shared_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for tests that only use their own uniquely named topics."""
    broker = BrokerProcess(tmp_path_factory.mktemp("shared") / "data").start()
    yield broker
    broker.stop()


@pytest.fixture
def fresh_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker of its own on an empty data directory (restartable by the test)."""
    broker = BrokerProcess(tmp_path / "data").start()
    yield broker
    broker.stop()

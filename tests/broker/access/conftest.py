"""The fixture of the access tests: a broker with ACLs on (support.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kshim.broker.broker import Broker
from tests.broker.access.support import OTHER, TOPIC, open_broker


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    """ACLs on, two topics (``orders`` keeps a full-data view), no ACL yet."""
    broker = await open_broker(tmp_path)
    await broker.topics.create(TOPIC, 2, {"kshim.full.view": "true"})
    await broker.topics.create(OTHER, 1, {})
    yield broker
    await broker.close()

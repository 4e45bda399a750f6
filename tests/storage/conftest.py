"""The ``harness`` fixture: a log store of each implementation in tests/storage/conformance.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.storage.conformance import IMPLEMENTATIONS, Harness, Implementation


@pytest.fixture(params=IMPLEMENTATIONS, ids=lambda implementation: implementation.name)
async def harness(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Harness]:
    implementation: Implementation = request.param
    harness = Harness(implementation, tmp_path)
    yield harness
    await harness.store.close()

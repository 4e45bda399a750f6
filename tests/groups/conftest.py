"""Fixtures: a group coordinator over a fake clock and a real LMDB store in tmp_path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kshim.broker.groups.coordinator import GroupCoordinator
from kshim.broker.groups.settings import GroupSettings
from kshim.storage.metadata import MetadataStore
from tests.groups.support import FakeClock


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

"""Calling handlers without a socket: a broker over the in-memory log store, a request
context, and encoded parts read back into kio's response objects (for handlers that answer
with encoded parts: Produce, Fetch)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from kio.serial import entity_reader

from kshim.api.context import RequestContext
from kshim.broker.broker import Broker
from kshim.broker.config.broker_config import BrokerConfig
from kshim.protocol import codec
from kshim.protocol.fetch_response import Part
from kshim.protocol.headers import RequestHeader
from kshim.storage.log.memory_log import MemoryLogStore

NOW_MS = 1_700_000_000_000  # the default clock's time: a fixed instant of November 2023


def fixed_clock() -> int:
    return NOW_MS


@contextlib.asynccontextmanager
async def memory_broker(
    directory: Path, topic: str, partitions: int, clock: Callable[[], int] = fixed_clock
) -> AsyncIterator[Broker]:
    """A started broker over the in-memory log store (its LMDB metadata in ``directory``,
    no full-view process) with ``topic`` of ``partitions`` partitions; closed on exit."""
    settings = {"log.dirs": str(directory), "kshim.full.view.process": "false"}
    broker = Broker(BrokerConfig.load([settings]), clock=clock, logs=MemoryLogStore(clock))
    await broker.start()
    try:
        await broker.topics.create(topic, partitions, {})
        yield broker
    finally:
        await broker.close()


def context(broker: Broker, api_key: int, version: int) -> RequestContext:
    return RequestContext(RequestHeader(api_key, version, 7, "unit-test"), broker)


def decoded(api_key: int, version: int, parts: list[Part] | None) -> Any:
    assert parts is not None
    body = b"".join(bytes(part) for part in parts)  # type: ignore[arg-type]
    response, size = entity_reader(codec.response_class(api_key, version))(memoryview(body), 0)
    assert size == len(body)
    return response

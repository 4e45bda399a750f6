"""Calling handlers without a socket: a request context, and encoded parts read back into
kio's response objects (for handlers that answer with encoded parts: Produce, Fetch)."""

from __future__ import annotations

from typing import Any

from kio.serial import entity_reader

from kshim.broker.broker import Broker
from kshim.broker.context import RequestContext
from kshim.protocol import codec
from kshim.protocol.fetch_response import Part
from kshim.protocol.headers import RequestHeader


def context(broker: Broker, api_key: int, version: int) -> RequestContext:
    return RequestContext(RequestHeader(api_key, version, 7, "unit-test"), broker)


def decoded(api_key: int, version: int, parts: list[Part] | None) -> Any:
    assert parts is not None
    body = b"".join(bytes(part) for part in parts)  # type: ignore[arg-type]
    response, size = entity_reader(codec.response_class(api_key, version))(memoryview(body), 0)
    assert size == len(body)
    return response

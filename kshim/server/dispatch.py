"""Turns one request frame into response bytes: decode, route, handle, encode.

Two kinds of failure, as in h11: the peer broke the protocol (a frame that
does not parse, an API or version kshim does not serve) raises
ProtocolViolation and the connection is closed, as Kafka does; anything a
client can get wrong inside a valid request is a Kafka error code in the
response, produced by the handler.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kshim.api.context import RequestContext
from kshim.api.routes import ROUTES, Route
from kshim.broker.broker import Broker
from kshim.broker.security.session import Session
from kshim.protocol import codec
from kshim.protocol.apis import ADVERTISED, API_VERSIONS_KEY, serves
from kshim.protocol.errors import ErrorCode
from kshim.protocol.fetch_response import Part
from kshim.protocol.framing import frame
from kshim.protocol.headers import (
    RequestHeader,
    encode_response_header,
    parse_request_header,
    peek_api,
)
from kshim.protocol.messages import serial
from kshim.protocol.messages.api_versions import ApiVersion, ApiVersionsResponse
from kshim.protocol.primitives import DecodeError

# ApiVersions v3+ uses flexible request headers even at versions this broker does not know.
API_VERSIONS_FIRST_FLEXIBLE = 3


class ProtocolViolation(Exception):
    """The peer sent something that is not a request kshim can parse; close the connection."""


class DecodingFailed(Exception):
    """kshim failed on a request it serves (its own fault, not the peer's); the message
    names the API and version."""


@dataclass(frozen=True, slots=True)
class Call:
    header: RequestHeader
    # The API's typed request (api/routes.py's route says which), or None for the
    # ApiVersions fallback.
    request: object


def decode(frame_bytes: bytes | bytearray) -> Call:
    """Parses a request frame; raises ProtocolViolation."""
    try:
        api_key, version, _ = peek_api(frame_bytes)
    except Exception as error:
        raise ProtocolViolation(f"unreadable request header: {error}") from error
    try:
        if api_key == API_VERSIONS_KEY and not serves(api_key, version):
            flexible = version >= API_VERSIONS_FIRST_FLEXIBLE
            header, _ = parse_request_header(frame_bytes, flexible)
            return Call(header, None)  # KIP-511: answered without parsing the body
        if not serves(api_key, version):
            raise ProtocolViolation(f"api {api_key} version {version} is not supported")
        header, body_offset = parse_request_header(frame_bytes, codec.is_flexible(api_key, version))
        request = _decode_body(ROUTES[api_key], api_key, version, frame_bytes, body_offset)
    except DecodeError as error:
        raise ProtocolViolation(str(error)) from error
    except ProtocolViolation:
        raise
    except Exception as error:
        raise DecodingFailed(f"decoding api {api_key} v{version} failed: {error!r}") from error
    return Call(header, request)


def _decode_body(
    route: Route[Any], api_key: int, version: int, frame_bytes: bytes | bytearray, offset: int
) -> object:
    if route.decode is not None:
        return route.decode(version, frame_bytes, offset)
    return serial.decode_request(route.request_type, api_key, version, frame_bytes, offset)


# Told of every request answered: (api key, version, top-level error code, seconds).
Observer = Callable[[int, int, int, float], None]


async def respond(
    call: Call,
    broker: Broker,
    client_host: str = "",
    observe: Observer | None = None,
    session: Session | None = None,
) -> list[Part] | None:
    """Runs the handler and returns the framed response, or None when none is due (acks=0)."""
    header = call.header
    if call.request is None:
        return _api_versions_fallback(header)
    started = 0.0 if observe is None else time.perf_counter()  # nothing when unobserved
    route = ROUTES[header.api_key]
    context = (
        RequestContext(header, broker, client_host)
        if session is None
        else RequestContext(header, broker, client_host, session)
    )
    body = await route.handle(call.request, context)
    if observe is not None:
        error_code = 0 if body is None or isinstance(body, list) else getattr(body, "error_code", 0)
        observe(header.api_key, header.api_version, error_code, time.perf_counter() - started)
    if body is None:
        return None
    return encoded_answer(header, body)


def encoded_answer(header: RequestHeader, body: object) -> list[Part]:
    """The framed answer to the request of ``header``: ``body``, a typed response encoded
    by its schema, or the parts a hand-encoding handler returned."""
    flexible = codec.is_flexible(header.api_key, header.api_version)
    # ApiVersions always answers with response header v0 (KIP-511).
    response_header = encode_response_header(
        header.correlation_id, flexible and header.api_key != API_VERSIONS_KEY
    )
    if isinstance(body, list):
        return frame([response_header, *body])
    encoded = serial.encode_response(header.api_key, header.api_version, body)
    return frame([response_header, encoded])


def _api_versions_fallback(header: RequestHeader) -> list[Part]:
    """A v0-format UNSUPPORTED_VERSION answer listing ApiVersions' own range (KIP-511)."""
    low, high = ADVERTISED[API_VERSIONS_KEY]
    answer = ApiVersionsResponse(
        error_code=ErrorCode.unsupported_version,
        api_keys=[ApiVersion(api_key=API_VERSIONS_KEY, min_version=low, max_version=high)],
        throttle_time_ms=0,
    )
    body = serial.encode_response(API_VERSIONS_KEY, 0, answer)
    return frame([encode_response_header(header.correlation_id, False), body])

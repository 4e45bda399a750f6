"""Runs one request through the server's decode/dispatch/encode path, without a socket.

A request is either a dict of kio field names (``call``) or a handler's typed request
(``send``); either is encoded with kio for the version asked, the same way a client puts
it on the wire (``kshim.client.wire``), so fields the version lacks are left out. The
response bytes are decoded back with kio's reader for that version, so every field a
version carries is checked as bytes, not as a handler's return value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kshim.broker.broker import Broker
from kshim.client.frames import decode_response, encode_request, request_header, with_size
from kshim.protocol import codec
from kshim.protocol.framing import FRAME_SIZE
from kshim.protocol.messages.convert import to_kio
from kshim.server.dispatch import decode, respond

CLIENT_ID = "wire-test"
CORRELATION_ID = 7


async def call(broker: Broker, api_key: int, version: int, fields: Mapping[str, Any]) -> Any:
    """Returns the decoded response to the request ``fields`` at ``version``."""
    request = encode_request(api_key, version, CORRELATION_ID, fields, client_id=CLIENT_ID)
    return await _exchange(broker, api_key, version, request)


async def send(broker: Broker, api_key: int, version: int, request: object) -> Any:
    """Returns the decoded response to the typed ``request`` sent at ``version``."""
    request_class = codec.request_class(api_key, version)
    body = codec.encode_entity(request_class, to_kio(request_class, request))
    flexible = codec.is_flexible(api_key, version)
    header = request_header(
        api_key, version, CORRELATION_ID, flexible=flexible, client_id=CLIENT_ID
    )
    return await _exchange(broker, api_key, version, with_size(header + body))


async def _exchange(broker: Broker, api_key: int, version: int, request: bytes) -> Any:
    parts = await respond(decode(request[FRAME_SIZE.size :]), broker)
    assert parts is not None
    frame = b"".join(bytes(part) for part in parts)
    correlation_id, response = decode_response(api_key, version, frame[FRAME_SIZE.size :])
    assert correlation_id == CORRELATION_ID
    return response

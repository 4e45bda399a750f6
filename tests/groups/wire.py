"""Runs one request through the server's decode/dispatch/encode path, without a socket.

Requests are built from dicts of kio field names and encoded with kio, the
same way a client would put them on the wire; the response bytes are decoded
back with kio's reader for that version, so every field a version carries is
checked as bytes, not as a handler's dict.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from kio.serial import entity_reader

from kshim.broker.broker import Broker
from kshim.protocol import codec
from kshim.protocol.primitives import read_tagged_fields
from kshim.server.dispatch import decode, respond

_HEADER = struct.Struct(">hhih")
CLIENT_ID = b"wire-test"


async def call(broker: Broker, api_key: int, version: int, fields: Mapping[str, Any]) -> Any:
    """Returns the decoded response to the request ``fields`` at ``version``."""
    flexible = codec.is_flexible(api_key, version)
    header = _HEADER.pack(api_key, version, 7, len(CLIENT_ID)) + CLIENT_ID
    request_class = codec.request_class(api_key, version)
    body = codec.encode_entity(request_class, codec.build(request_class, fields, any_version=True))
    parts = await respond(decode(header + (b"\x00" if flexible else b"") + body), broker)
    assert parts is not None
    frame = b"".join(bytes(part) for part in parts)[4:]
    assert struct.unpack_from(">i", frame)[0] == 7
    position = read_tagged_fields(frame, 4) if flexible else 4
    reader = entity_reader(codec.response_class(api_key, version))
    response, size = reader(memoryview(frame)[position:], 0)
    assert position + size == len(frame)
    return response

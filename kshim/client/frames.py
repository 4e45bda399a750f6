"""Kafka request and response frames as bytes, without a socket: request headers v1 and v2,
kio's encoding of a request given as a nested dict of field names, and a response frame's
correlation id, header and kio answer. ``kshim.client.wire`` sends and reads them; tests
use them to put exact bytes on the wire.

On the wire (https://kafka.apache.org/protocol#protocol_common and #protocol_messages)::

    frame               size int32, then size bytes
    request header v1   api_key int16, api_version int16, correlation_id int32,
                        client_id nullable string (int16 length)
    request header v2   v1, then tagged fields (flexible versions, KIP-482)
    response header v0  correlation_id int32
    response header v1  v0, then tagged fields (flexible versions)

ApiVersions always answers with response header v0, whatever version was asked, so that a
client can read the answer of a broker that does not serve its version (KIP-511).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from kio.serial import entity_reader
from kio.serial.errors import SerialError

from kshim.protocol import codec
from kshim.protocol.apis import API_VERSIONS_KEY
from kshim.protocol.framing import FRAME_SIZE
from kshim.protocol.headers import CORRELATION_ID, EMPTY_TAGGED_FIELDS
from kshim.protocol.primitives import DecodeError, read_tagged_fields, write_string

# api key, api version, correlation id; the client id follows (headers.py parses all four)
REQUEST_HEADER_START = struct.Struct(">hhi")
DEFAULT_CLIENT_ID = "kshim-wire-client"


class MalformedResponseError(Exception):
    """An answer that is not the response expected: an implausible size, another request's
    correlation id, a header or body that does not decode, or bytes left over after it."""


def request_header(
    api_key: int,
    api_version: int,
    correlation_id: int,
    *,
    flexible: bool,
    client_id: str | None = DEFAULT_CLIENT_ID,
) -> bytes:
    """Request header v1, or v2 (v1 and an empty tagged-field section) when ``flexible``.

    The client id is a nullable string with an int16 length in both: header v2 keeps it
    non-compact, so that any broker can parse the header (KIP-482).
    """
    start = REQUEST_HEADER_START.pack(api_key, api_version, correlation_id)
    client = write_string(client_id, flexible=False)
    return start + client + (EMPTY_TAGGED_FIELDS if flexible else b"")


def encode_body(api_key: int, api_version: int, fields: Mapping[str, object]) -> bytes:
    """kio's encoding of a request body given as a nested dict of field names.

    Raises KeyError for an API version kio does not know, and what ``codec.build`` raises
    for a field name no version of the message has.
    """
    request_class = codec.request_class(api_key, api_version)
    return codec.encode_entity(request_class, codec.build(request_class, fields, any_version=True))


def with_size(payload: bytes) -> bytes:
    """``payload`` behind its int32 size: one frame."""
    return FRAME_SIZE.pack(len(payload)) + payload


def encode_request(
    api_key: int,
    api_version: int,
    correlation_id: int,
    fields: Mapping[str, object],
    *,
    client_id: str | None = DEFAULT_CLIENT_ID,
) -> bytes:
    """A whole request frame, with the header version that the API version calls for."""
    flexible = codec.is_flexible(api_key, api_version)
    header = request_header(
        api_key, api_version, correlation_id, flexible=flexible, client_id=client_id
    )
    return with_size(header + encode_body(api_key, api_version, fields))


def response_header_is_flexible(api_key: int, api_version: int) -> bool:
    """True when the answer carries response header v1: flexible versions but ApiVersions."""
    return api_key != API_VERSIONS_KEY and codec.is_flexible(api_key, api_version)


def correlation_id_of(frame: bytes) -> int:
    """The correlation id that a response frame starts with; raises MalformedResponseError."""
    if len(frame) < CORRELATION_ID.size:
        raise MalformedResponseError(f"a {len(frame)}-byte frame has no correlation id")
    correlation_id: int = CORRELATION_ID.unpack_from(frame, 0)[0]
    return correlation_id


def split_response(api_key: int, api_version: int, frame: bytes) -> tuple[int, bytes]:
    """(correlation id, body) of a response frame; raises MalformedResponseError."""
    correlation_id = correlation_id_of(frame)
    position = CORRELATION_ID.size
    if response_header_is_flexible(api_key, api_version):
        try:
            position = read_tagged_fields(frame, position)
        except DecodeError as error:
            raise MalformedResponseError(f"response header v1: {error}") from error
    return correlation_id, frame[position:]


def decode_response(api_key: int, api_version: int, frame: bytes) -> tuple[int, Any]:
    """(correlation id, kio response) of a response frame, the size prefix taken off.

    Raises MalformedResponseError when the body does not decode as that response version
    or has bytes left over.
    """
    correlation_id, body = split_response(api_key, api_version, frame)
    response_class = codec.response_class(api_key, api_version)
    try:
        response, size = entity_reader(response_class)(body, 0)
    except (SerialError, ValueError) as error:  # kio's own errors, and its enums' ValueError
        raise MalformedResponseError(f"{response_class.__name__}: {error}") from error
    if size != len(body):
        left = len(body) - size
        raise MalformedResponseError(f"{left} bytes left over after {response_class.__name__}")
    return correlation_id, response

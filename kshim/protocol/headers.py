"""Request and response headers (https://kafka.apache.org/protocol#protocol_messages).

Request header v1: api_key int16, api_version int16, correlation_id int32,
client_id nullable string (int16 length). Header v2 (flexible versions) adds a
tagged-field section. Response header v0 is the correlation id alone; v1 adds
an (empty) tagged-field section. ApiVersions always answers with header v0
(KIP-511), whatever version was asked.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kshim.protocol.primitives import DecodeError, read_tagged_fields

REQUEST_HEADER_FIXED = struct.Struct(">hhih")
CORRELATION_ID = struct.Struct(">i")
API_VERSIONS_KEY = 18
EMPTY_TAGGED_FIELDS = b"\x00"


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def peek_api(frame: bytes | bytearray) -> tuple[int, int, int]:
    """Returns (api_key, api_version, correlation_id) without parsing further."""
    api_key, api_version, correlation_id, _ = REQUEST_HEADER_FIXED.unpack_from(frame, 0)
    return api_key, api_version, correlation_id


def parse_request_header(frame: bytes | bytearray, flexible: bool) -> tuple[RequestHeader, int]:
    """Parses the header of a request frame.

    Returns the header and the offset where the body starts. Raises DecodeError
    when the frame is too short for the header it claims to carry.
    """
    if len(frame) < REQUEST_HEADER_FIXED.size:
        raise DecodeError("request header truncated")
    api_key, api_version, correlation_id, client_id_length = REQUEST_HEADER_FIXED.unpack_from(
        frame, 0
    )
    position = REQUEST_HEADER_FIXED.size
    client_id: str | None = None
    if client_id_length >= 0:
        end = position + client_id_length
        if end > len(frame):
            raise DecodeError("client_id runs past the end of the frame")
        client_id = frame[position:end].decode("utf-8", errors="replace")
        position = end
    if flexible:
        position = read_tagged_fields(frame, position)
    return RequestHeader(api_key, api_version, correlation_id, client_id), position


def encode_response_header(correlation_id: int, flexible: bool) -> bytes:
    """Returns response header v1 when ``flexible`` (tagged fields), else v0."""
    header = CORRELATION_ID.pack(correlation_id)
    return header + EMPTY_TAGGED_FIELDS if flexible else header

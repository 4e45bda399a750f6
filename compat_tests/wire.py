"""A minimal raw-socket Kafka client: kio-encoded requests, frames read with deadlines.

Used where a scenario must see the protocol itself rather than a client library's view of
it (https://kafka.apache.org/protocol#protocol_messages). Request header v1, or v2 for
flexible versions; response header v0, or v1 for flexible versions except ApiVersions,
which always answers with v0 (KIP-511).
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from kio.serial import entity_reader

from kshim.protocol import codec

FRAME_SIZE = struct.Struct(">i")
REQUEST_HEADER = struct.Struct(">hhih")
CORRELATION_ID = struct.Struct(">i")
API_VERSIONS_KEY = 18
CLIENT_ID = b"kshim-compat"
TIMEOUT_S = 10.0


class ConnectionClosedError(Exception):
    """The broker closed the connection before a whole response arrived."""


def request_bytes(
    api_key: int, version: int, correlation_id: int, body: bytes, flexible: bool
) -> bytes:
    """A size-prefixed request frame around an already encoded body."""
    header = REQUEST_HEADER.pack(api_key, version, correlation_id, len(CLIENT_ID)) + CLIENT_ID
    if flexible:
        header += b"\x00"  # empty tagged-field section of request header v2
    payload = header + body
    return FRAME_SIZE.pack(len(payload)) + payload


def encode_request_body(api_key: int, version: int, fields: Mapping[str, Any]) -> bytes:
    """kio's encoding of a request described as a nested dict (missing fields zeroed)."""
    cls = codec.request_class(api_key, version)
    return codec.encode_entity(cls, codec.build(cls, fields, any_version=True))


def split_response(api_key: int, version: int, frame: bytes) -> tuple[int, bytes]:
    """(correlation id, body bytes) of a response frame; checks the header's tagged fields."""
    (correlation_id,) = CORRELATION_ID.unpack_from(frame, 0)
    position = CORRELATION_ID.size
    if codec.is_flexible(api_key, version) and api_key != API_VERSIONS_KEY:
        assert frame[position : position + 1] == b"\x00", "response header v1 tagged fields"
        position += 1
    return correlation_id, frame[position:]


def decode_response_body(api_key: int, version: int, body: bytes) -> Any:
    """kio's decoding of a response body; fails when bytes are left over."""
    cls = codec.response_class(api_key, version)
    entity, size = entity_reader(cls)(body, 0)
    assert size == len(body), f"{len(body) - size} bytes left over after {cls.__name__}"
    return entity


class RawConnection:
    """One TCP connection sending one request at a time."""

    def __init__(self, host: str, port: int, timeout_s: float = TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self._correlation_id = 0

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.sock.close()

    def exchange(self, api_key: int, version: int, body: bytes, flexible: bool) -> bytes:
        """Sends one request body and returns the response frame (correlation id checked)."""
        self._correlation_id += 1
        self.sock.sendall(request_bytes(api_key, version, self._correlation_id, body, flexible))
        frame = self.read_frame()
        (correlation_id,) = CORRELATION_ID.unpack_from(frame, 0)
        assert correlation_id == self._correlation_id, (correlation_id, self._correlation_id)
        return frame

    def call(self, api_key: int, version: int, fields: Mapping[str, Any]) -> Any:
        """Sends a kio-encoded request and returns the decoded kio response."""
        body = encode_request_body(api_key, version, fields)
        frame = self.exchange(api_key, version, body, codec.is_flexible(api_key, version))
        _, response_body = split_response(api_key, version, frame)
        return decode_response_body(api_key, version, response_body)

    def read_frame(self) -> bytes:
        (size,) = FRAME_SIZE.unpack(self._read_exactly(FRAME_SIZE.size))
        assert 0 <= size < 1 << 28, f"implausible response size {size}"
        return self._read_exactly(size)

    def _read_exactly(self, count: int) -> bytes:
        deadline = time.monotonic() + self.timeout_s
        received = bytearray()
        while len(received) < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"got {len(received)} of {count} bytes")
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(count - len(received))
            except ConnectionResetError as error:
                raise ConnectionClosedError("connection reset") from error
            if not chunk:
                raise ConnectionClosedError(f"EOF after {len(received)} of {count} bytes")
            received += chunk
        return bytes(received)

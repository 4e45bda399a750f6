"""A raw-socket Kafka client for robustness tests: hand-built frames, bounded reads.

Everything on the wire is spelled out here rather than taken from a client
library, so a test can send exactly the bytes it means, including broken ones
(https://kafka.apache.org/protocol#protocol_common). Message bodies that are
meant to be valid are encoded with kio's generated codecs. Every read has a
deadline; nothing here waits forever.
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
REQUEST_HEADER_FIXED = struct.Struct(">hhi")
CLIENT_ID_LENGTH = struct.Struct(">h")
CORRELATION_ID = struct.Struct(">i")
EMPTY_TAGGED_FIELDS = b"\x00"
API_VERSIONS_KEY = 18
DEFAULT_CLIENT_ID = "bad-input-test"
DEFAULT_TIMEOUT_S = 5.0
RECEIVE_CHUNK = 65536


class ConnectionClosedError(Exception):
    """The broker closed the connection (FIN or RST) before the expected bytes arrived."""


def request_header(
    api_key: int,
    api_version: int,
    correlation_id: int,
    *,
    flexible: bool,
    client_id: str | None = DEFAULT_CLIENT_ID,
) -> bytes:
    """Returns request header v1, or v2 (v1 plus an empty tagged-field section) when flexible."""
    fixed = REQUEST_HEADER_FIXED.pack(api_key, api_version, correlation_id)
    if client_id is None:
        client = CLIENT_ID_LENGTH.pack(-1)
    else:
        encoded = client_id.encode()
        client = CLIENT_ID_LENGTH.pack(len(encoded)) + encoded
    return fixed + client + (EMPTY_TAGGED_FIELDS if flexible else b"")


def encode_body(api_key: int, api_version: int, fields: Mapping[str, Any]) -> bytes:
    """Encodes a request body from a nested dict of kio field names (missing ones zeroed)."""
    request_class = codec.request_class(api_key, api_version)
    return codec.encode_entity(request_class, codec.build(request_class, fields, any_version=True))


def encode_request(
    api_key: int, api_version: int, correlation_id: int, fields: Mapping[str, Any]
) -> bytes:
    """Returns a whole, size-prefixed request frame with the header version the API expects."""
    flexible = codec.is_flexible(api_key, api_version)
    header = request_header(api_key, api_version, correlation_id, flexible=flexible)
    return with_size(header + encode_body(api_key, api_version, fields))


def with_size(body: bytes) -> bytes:
    """Prefixes ``body`` with its int32 size."""
    return FRAME_SIZE.pack(len(body)) + body


def decode_response(api_key: int, api_version: int, frame: bytes) -> tuple[int, Any]:
    """Returns (correlation id, kio response) of a response frame body.

    Response header v1 (a tagged-field byte after the correlation id) goes with
    flexible versions, except ApiVersions, which always answers with header v0
    (KIP-511). Raises AssertionError when the body has bytes left over.
    """
    (correlation_id,) = CORRELATION_ID.unpack_from(frame, 0)
    position = CORRELATION_ID.size
    if codec.is_flexible(api_key, api_version) and api_key != API_VERSIONS_KEY:
        assert frame[position : position + 1] == EMPTY_TAGGED_FIELDS, frame[:16].hex()
        position += 1
    response_class = codec.response_class(api_key, api_version)
    entity, size = entity_reader(response_class)(frame, position)
    assert position + size == len(frame), f"{len(frame) - position - size} bytes left over"
    return correlation_id, entity


class RawConnection:
    """One TCP connection to a broker that sends raw bytes and reads frames with deadlines."""

    def __init__(self, port: int, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._next_correlation_id = 1

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def half_close(self) -> None:
        """Sends FIN (no more requests) while still able to read what the broker sends."""
        self.sock.shutdown(socket.SHUT_WR)

    def reset(self) -> None:
        """Closes with RST instead of FIN (SO_LINGER with a zero timeout)."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()

    def next_correlation_id(self) -> int:
        correlation_id = self._next_correlation_id
        self._next_correlation_id += 1
        return correlation_id

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_request(
        self, api_key: int, api_version: int, fields: Mapping[str, Any], correlation_id: int
    ) -> None:
        self.send(encode_request(api_key, api_version, correlation_id, fields))

    def read_exactly(self, count: int, timeout_s: float | None = None) -> bytes:
        """Returns ``count`` bytes.

        Raises ConnectionClosedError on EOF or reset, TimeoutError at the deadline.
        """
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        received = bytearray()
        while len(received) < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"got {len(received)} of {count} bytes before the deadline")
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(count - len(received))
            except ConnectionResetError as error:
                raise ConnectionClosedError("connection reset") from error
            except TimeoutError:
                continue  # the loop re-checks the deadline and raises with the byte count
            if not chunk:
                raise ConnectionClosedError(f"EOF after {len(received)} of {count} bytes")
            received += chunk
        return bytes(received)

    def read_frame(self, timeout_s: float | None = None) -> bytes:
        """Returns the body of the next size-prefixed frame."""
        (size,) = FRAME_SIZE.unpack(self.read_exactly(FRAME_SIZE.size, timeout_s))
        assert 0 <= size < 1 << 27, f"implausible response size {size}"
        return self.read_exactly(size, timeout_s)

    def read_response(
        self, api_key: int, api_version: int, correlation_id: int, timeout_s: float | None = None
    ) -> Any:
        """Reads one response and checks it answers ``correlation_id``; returns the kio entity."""
        got_id, response = decode_response(api_key, api_version, self.read_frame(timeout_s))
        assert got_id == correlation_id, f"expected correlation id {correlation_id}, got {got_id}"
        return response

    def call(self, api_key: int, api_version: int, fields: Mapping[str, Any] | None = None) -> Any:
        """Sends one request and returns its decoded response."""
        correlation_id = self.next_correlation_id()
        self.send_request(api_key, api_version, fields or {}, correlation_id)
        return self.read_response(api_key, api_version, correlation_id)

    def wait_closed(self, timeout_s: float | None = None) -> bytes:
        """Waits until the broker closes the connection; returns the bytes received first.

        Raises TimeoutError if the connection is still open at the deadline.
        """
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        received = bytearray()
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"connection still open; received {bytes(received)[:64]!r}")
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(RECEIVE_CHUNK)
            except ConnectionResetError:
                return bytes(received)
            except TimeoutError:
                continue
            if not chunk:
                return bytes(received)
            received += chunk

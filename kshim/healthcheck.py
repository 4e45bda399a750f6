"""``python -m kshim.healthcheck [HOST:PORT]``: exits 0 when a Kafka broker answers there.

A health check that speaks the protocol rather than probing the port: it sends
ApiVersions v0 (request header v1, empty body) and requires a well-formed answer with the
same correlation id, error code 0 and ApiVersions itself among the listed APIs
(https://kafka.apache.org/protocol#The_Messages_ApiVersions). Used by the Docker image's
HEALTHCHECK; standard library only, one blocking round trip bounded by a timeout.
"""

from __future__ import annotations

import socket
import struct
import sys

DEFAULT_ADDRESS = "127.0.0.1:9092"
TIMEOUT_S = 5.0
API_VERSIONS_KEY = 18
CORRELATION_ID = 0x6B5348  # any value; checked on the way back
CLIENT_ID = b"kshim-healthcheck"
MAX_RESPONSE_BYTES = 1 << 16
REQUEST_HEADER = struct.Struct(">hhih")  # api key, api version, correlation id, client id length
SIZE = struct.Struct(">i")
RESPONSE_HEAD = struct.Struct(">ihi")  # correlation id, error code, api key count
API_ENTRY = struct.Struct(">hhh")  # api key, min version, max version


class UnhealthyError(Exception):
    """The broker did not answer, or answered something that is not an ApiVersions v0 reply."""


def api_versions_request() -> bytes:
    """A size-prefixed ApiVersions v0 request frame."""
    payload = REQUEST_HEADER.pack(API_VERSIONS_KEY, 0, CORRELATION_ID, len(CLIENT_ID)) + CLIENT_ID
    return SIZE.pack(len(payload)) + payload


def check_response(frame: bytes) -> list[int]:
    """Returns the advertised API keys; raises UnhealthyError for a bad answer."""
    if len(frame) < RESPONSE_HEAD.size:
        raise UnhealthyError(f"short response ({len(frame)} bytes)")
    correlation_id, error_code, count = RESPONSE_HEAD.unpack_from(frame, 0)
    if correlation_id != CORRELATION_ID:
        raise UnhealthyError(f"correlation id {correlation_id}, expected {CORRELATION_ID}")
    if error_code != 0:
        raise UnhealthyError(f"ApiVersions error code {error_code}")
    if count < 0 or RESPONSE_HEAD.size + count * API_ENTRY.size > len(frame):
        raise UnhealthyError(f"malformed api key list ({count} entries)")
    keys = [
        API_ENTRY.unpack_from(frame, RESPONSE_HEAD.size + index * API_ENTRY.size)[0]
        for index in range(count)
    ]
    if API_VERSIONS_KEY not in keys:
        raise UnhealthyError("ApiVersions is not among the advertised APIs")
    return keys


def probe(host: str, port: int, timeout_s: float = TIMEOUT_S) -> list[int]:
    """Sends ApiVersions v0 and returns the advertised API keys; raises UnhealthyError."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as connection:
            connection.sendall(api_versions_request())
            (size,) = SIZE.unpack(_read(connection, SIZE.size))
            if not 0 < size <= MAX_RESPONSE_BYTES:
                raise UnhealthyError(f"implausible response size {size}")
            return check_response(_read(connection, size))
    except OSError as error:
        raise UnhealthyError(f"{host}:{port}: {error}") from error


def _read(connection: socket.socket, count: int) -> bytes:
    received = bytearray()
    while len(received) < count:
        chunk = connection.recv(count - len(received))
        if not chunk:
            raise UnhealthyError(f"connection closed after {len(received)} of {count} bytes")
        received += chunk
    return bytes(received)


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    host, _, port = (arguments[0] if arguments else DEFAULT_ADDRESS).rpartition(":")
    try:
        keys = probe(host or "127.0.0.1", int(port))
    except (UnhealthyError, ValueError) as error:
        print(f"unhealthy: {error}", file=sys.stderr)
        return 1
    print(f"healthy: {len(keys)} APIs advertised")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A small blocking Kafka client: one TCP connection, requests as nested dicts, kio answers.

For programs that must see the protocol itself rather than a client library's view of it:
``kshim groups``, the Docker health check, the raw-protocol tests and the benchmarks. A
request is a nested dict of kio field names, encoded by ``codec.build(..., any_version=True)``
(fields the version lacks are dropped, missing ones zero-filled); an answer is kio's
dataclass for that response version, which ``call_for`` names and checks, so that what a
caller reads of the answer is type-checked. The raw pieces (request headers, frames, exact
bytes out, one frame in) let a test send broken input and watch what comes back.

Frames are built and taken apart in ``kshim.client.frames``.

With a ClientSecurity (``kshim.client.security``: a Kafka client's properties) the
connection speaks TLS for SSL and SASL_SSL, and for SASL_PLAINTEXT and SASL_SSL it
authenticates before anything else is sent, as Kafka's clients do (KIP-152: SaslHandshake,
then SaslAuthenticate until the mechanism completes; the steps are
``kshim.client.sasl_login``'s). A refusal raises AuthenticationFailed with the broker's
error message; Kafka then closes the connection. kshim's tools run for less than a session
lifetime, so re-authentication (KIP-368) is not done: a broker that sets
connections.max.reauth.ms closes a connection kept past it.

Every read has a deadline and every response a size bound: nothing here waits forever or
allocates what a garbage size prefix claims. A connection is not thread-safe; use one per
thread.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Self, TypeVar

from kshim.client.frames import (
    DEFAULT_CLIENT_ID,
    MalformedResponseError,
    correlation_id_of,
    decode_response,
    encode_request,
    request_header,
    with_size,
)
from kshim.client.sasl_login import login
from kshim.client.security import ClientSecurity
from kshim.protocol.framing import FRAME_SIZE

DEFAULT_TIMEOUT_S = 10.0
# A guard against reading a garbage size prefix as an allocation, not a protocol limit: a
# Fetch answer is bounded by the request's max_bytes (fetch.max.bytes, 50 MiB by default).
DEFAULT_MAX_RESPONSE_BYTES = 1 << 28
RECEIVE_CHUNK = 1 << 16

Response = TypeVar("Response")


class ConnectionClosedError(ConnectionError):
    """The broker closed the connection (FIN or RST) before the expected bytes arrived."""


def parse_bootstrap(bootstrap: str) -> tuple[str, int]:
    """(host, port) of ``host:port``, the first of a comma-separated list; raises ValueError."""
    host, _, port = bootstrap.split(",", maxsplit=1)[0].strip().rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"{bootstrap!r} is not host:port")
    return host.strip("[]"), int(port)


class WireConnection:
    """One TCP connection to a broker; one thread at a time sends and reads on it.

    ``call`` is a request and its answer. For tests, ``send`` puts exact bytes on the wire,
    ``read_frame`` and ``read_response`` take one answer, and ``wait_closed`` waits for the
    broker to close. Reads raise TimeoutError at their deadline and ConnectionClosedError
    when the broker closes first; both are OSErrors, as are connection failures.
    """

    def __init__(
        self,
        host: str,
        port: int,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        *,
        client_id: str | None = DEFAULT_CLIENT_ID,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        security: ClientSecurity | None = None,
        source_host: str | None = None,
    ) -> None:
        """Connects, with TLS and SASL when ``security`` says so (None: PLAINTEXT), from
        ``source_host`` when given (another loopback address is another peer to the broker).

        Raises OSError (TimeoutError when the connection is not made in time, ssl.SSLError
        when the TLS handshake fails, as on a certificate that does not verify),
        AuthenticationFailed when the broker refuses the SASL credentials, and
        ClientSecurityError for TLS files that cannot be used.
        """
        self.timeout_s = timeout_s
        self.client_id = client_id
        self.max_response_bytes = max_response_bytes
        source = None if source_host is None else (source_host, 0)
        self._socket = socket.create_connection((host, port), timeout_s, source)
        # Each request is sent whole and then waited for: Nagle's algorithm only delays it.
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._next_correlation_id = 1
        if security is not None:
            try:
                self._secure(host, security)
            except BaseException:
                self._socket.close()
                raise

    def _secure(self, host: str, security: ClientSecurity) -> None:
        context = security.ssl_context()
        if context is not None:
            # The handshake runs here, bounded by the socket's timeout; the broker's
            # certificate must name ``host`` unless the hostname check is off.
            self._socket = context.wrap_socket(self._socket, server_hostname=host)
        if security.mechanism is not None:
            self.authenticate(security.mechanism, security.username or "", security.password or "")

    def authenticate(self, mechanism: str, username: str, password: str) -> None:
        """SaslHandshake v1, then SaslAuthenticate v2 until ``mechanism`` completes; raises
        AuthenticationFailed when the broker refuses (its error message said) or its SCRAM
        answer does not verify (the steps: kshim.client.sasl_login)."""
        steps = login(mechanism, username, password)
        request = next(steps)
        while True:
            try:
                request = steps.send(self.call(*request))
            except StopIteration:
                return

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._socket.close()

    def half_close(self) -> None:
        """Sends FIN (no more requests) while still able to read what the broker sends; on a
        plaintext connection only (Python's TLS socket drops its TLS state on shutdown)."""
        self._socket.shutdown(socket.SHUT_WR)

    def reset(self) -> None:
        """Closes with RST instead of FIN (SO_LINGER on with a zero timeout)."""
        linger_now = struct.pack("ii", 1, 0)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger_now)
        self._socket.close()

    def next_correlation_id(self) -> int:
        correlation_id = self._next_correlation_id
        self._next_correlation_id += 1
        return correlation_id

    def send(self, data: bytes) -> None:
        """Writes ``data`` as it is; raises OSError, TimeoutError after ``timeout_s``."""
        self._socket.settimeout(self.timeout_s)
        self._socket.sendall(data)

    def call(
        self, api_key: int, api_version: int, fields: Mapping[str, object] | None = None
    ) -> Any:
        """Sends one request built from ``fields`` and returns kio's decoded answer to it."""
        correlation_id = self.next_correlation_id()
        request = encode_request(
            api_key, api_version, correlation_id, fields or {}, client_id=self.client_id
        )
        self.send(request)
        return self.read_response(api_key, api_version, correlation_id)

    def call_for(
        self,
        response_type: type[Response],
        api_key: int,
        api_version: int,
        fields: Mapping[str, object] | None = None,
    ) -> Response:
        """``call``, its answer checked to be ``response_type`` (kio's class of that API
        version's response), so that the fields read from it are type-checked; raises
        MalformedResponseError for an answer of another class."""
        answer = self.call(api_key, api_version, fields)
        if not isinstance(answer, response_type):
            message = f"{type(answer).__name__} where {response_type.__name__} was expected"
            raise MalformedResponseError(message)
        return answer

    def exchange(self, api_key: int, api_version: int, body: bytes, *, flexible: bool) -> bytes:
        """Sends an already encoded ``body`` under a header of this client's making and
        returns the answer's frame, its correlation id checked."""
        correlation_id = self.next_correlation_id()
        header = request_header(
            api_key, api_version, correlation_id, flexible=flexible, client_id=self.client_id
        )
        self.send(with_size(header + body))
        frame = self.read_frame()
        self._check_answers(correlation_id, correlation_id_of(frame))
        return frame

    def read_response(
        self, api_key: int, api_version: int, correlation_id: int, timeout_s: float | None = None
    ) -> Any:
        """Reads the next answer, which must be to ``correlation_id``; returns kio's entity."""
        answered, response = decode_response(api_key, api_version, self.read_frame(timeout_s))
        self._check_answers(correlation_id, answered)
        return response

    def read_frame(self, timeout_s: float | None = None) -> bytes:
        """The next frame, its size prefix taken off; raises MalformedResponseError for a
        size that is negative or over ``max_response_bytes``."""
        deadline = self._deadline(timeout_s)
        (size,) = FRAME_SIZE.unpack(self._read_until(FRAME_SIZE.size, deadline))
        if not 0 <= size <= self.max_response_bytes:
            raise MalformedResponseError(f"implausible response size {size}")
        return self._read_until(size, deadline)

    def read_exactly(self, count: int, timeout_s: float | None = None) -> bytes:
        """The next ``count`` bytes, whatever they are."""
        return self._read_until(count, self._deadline(timeout_s))

    def wait_closed(self, timeout_s: float | None = None) -> bytes:
        """Waits for the broker to close the connection; returns what it sent before.

        Raises TimeoutError when the connection is still open at the deadline.
        """
        deadline = self._deadline(timeout_s)
        received = bytearray()
        while True:
            try:
                chunk = self._receive(RECEIVE_CHUNK, deadline)
            except ConnectionClosedError:
                return bytes(received)
            except TimeoutError as error:
                sample = bytes(received[:64])
                raise TimeoutError(f"connection still open; received {sample!r}") from error
            received += chunk

    def _read_until(self, count: int, deadline: float) -> bytes:
        received = bytearray()
        while len(received) < count:
            try:
                received += self._receive(count - len(received), deadline)
            except ConnectionClosedError as error:
                message = f"{error} after {len(received)} of {count} bytes"
                raise ConnectionClosedError(message) from error
            except TimeoutError as error:
                message = f"got {len(received)} of {count} bytes before the deadline"
                raise TimeoutError(message) from error
        return bytes(received)

    def _receive(self, most: int, deadline: float) -> bytes:
        """At most ``most`` bytes, at least one; raises ConnectionClosedError on EOF or reset,
        TimeoutError once ``deadline`` (time.monotonic) has passed."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("deadline passed")
        self._socket.settimeout(remaining)
        try:
            chunk = self._socket.recv(most)
        except ConnectionResetError as error:
            raise ConnectionClosedError("connection reset") from error
        if not chunk:
            raise ConnectionClosedError("EOF")
        return chunk

    def _deadline(self, timeout_s: float | None) -> float:
        return time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)

    @staticmethod
    def _check_answers(expected: int, answered: int) -> None:
        if answered != expected:
            message = f"an answer to correlation id {answered}, expected {expected}"
            raise MalformedResponseError(message)


def connect(
    bootstrap: str,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    *,
    client_id: str | None = DEFAULT_CLIENT_ID,
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    security: ClientSecurity | None = None,
) -> WireConnection:
    """A connection to the first broker of ``bootstrap`` (``host:port[,...]``), secured as
    ``security`` says (None: PLAINTEXT).

    Raises ValueError for an address that is not host:port, OSError when it cannot connect,
    and what WireConnection raises for TLS and SASL.
    """
    host, port = parse_bootstrap(bootstrap)
    return WireConnection(
        host,
        port,
        timeout_s,
        client_id=client_id,
        max_response_bytes=max_response_bytes,
        security=security,
    )

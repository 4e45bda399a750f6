"""A scripted Kafka-protocol peer on a loopback port, for what a real kshim broker never
answers: each API key is answered by a test's function from the decoded request, and
every request is kept for the test to inspect.

Requests are decoded and answers encoded with kio's classes (``kshim.protocol.codec``), in
whatever version the client asked; an API key without a script closes the connection, as
a broker does for an API it does not serve. With a server ``tls`` context each connection
speaks TLS. Every wait is bounded; the threads are daemons and stop with ``stop()``.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from kshim.client.frames import response_header_is_flexible, with_size
from kshim.protocol import codec
from kshim.protocol.framing import FRAME_SIZE
from kshim.protocol.headers import encode_response_header, parse_request_header, peek_api

Script = Callable[[Any], Mapping[str, Any]]
ACCEPT_POLL_S = 0.1
READ_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 5.0


@dataclass
class ScriptedBroker:
    """Answers ``scripts[api_key](request)`` (a nested dict of kio field names)."""

    scripts: dict[int, Script]
    requests: list[tuple[int, int, Any]] = field(default_factory=list)  # key, version, request
    tls: ssl.SSLContext | None = None  # a server context: connections speak TLS
    _listener: socket.socket | None = None
    _threads: list[threading.Thread] = field(default_factory=list)
    _stopping: threading.Event = field(default_factory=threading.Event)

    @property
    def port(self) -> int:
        assert self._listener is not None
        port: int = self._listener.getsockname()[1]
        return port

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> ScriptedBroker:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(ACCEPT_POLL_S)
        self._spawn(self._accept)
        return self

    def stop(self) -> None:
        self._stopping.set()
        for thread in self._threads:
            thread.join(STOP_TIMEOUT_S)
        if self._listener is not None:
            self._listener.close()

    def requests_of(self, api_key: int) -> list[Any]:
        return [request for key, _, request in self.requests if key == api_key]

    def _spawn(self, target: Callable[..., None], *arguments: Any) -> None:
        thread = threading.Thread(target=target, args=arguments, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        assert self._listener is not None
        while not self._stopping.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            self._spawn(self._serve, connection)

    def _serve(self, connection: socket.socket) -> None:
        connection.settimeout(READ_TIMEOUT_S)
        with contextlib.ExitStack() as open_sockets, contextlib.suppress(OSError):
            open_sockets.enter_context(connection)
            if self.tls is not None:
                # The handshake runs here; one that fails (a client that does not trust the
                # certificate) ends the connection.
                connection = self.tls.wrap_socket(connection, server_side=True)
                open_sockets.enter_context(connection)
            for frame in _frames(connection):
                api_key, version, _ = peek_api(frame)
                script = self.scripts.get(api_key)
                if script is None:
                    return
                header, offset = parse_request_header(frame, codec.is_flexible(api_key, version))
                request = codec.decode_request(api_key, version, frame, offset)
                self.requests.append((api_key, version, request))
                body = codec.encode_response(api_key, version, script(request))
                flexible = response_header_is_flexible(api_key, version)
                answer = encode_response_header(header.correlation_id, flexible) + body
                connection.sendall(with_size(answer))


def _frames(connection: socket.socket) -> Iterator[bytes]:
    """Each request frame, its size taken off, until the client closes."""
    while True:
        size_bytes = _read(connection, FRAME_SIZE.size)
        if size_bytes is None:
            return
        (size,) = FRAME_SIZE.unpack(size_bytes)
        frame = _read(connection, size)
        if frame is None:
            return
        yield frame


def _read(connection: socket.socket, count: int) -> bytes | None:
    received = bytearray()
    while len(received) < count:
        chunk = connection.recv(count - len(received))
        if not chunk:
            return None
        received += chunk
    return bytes(received)

"""The one connection an admin command's requests go over (``kshim topics``, ``groups``',
``acls``' and ``users``' subcommands), through kshim's own blocking client, and what every
client of one connection shares: each request sent at the version it names, its answer
checked to be kio's class of that version, and each error code in an answer raised as
the client's own error with Kafka's name for it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import ClassVar, Self, TypeVar

from kshim.client.errors import broken_off, check_answer
from kshim.client.frames import MalformedResponseError
from kshim.client.security import ClientSecurity
from kshim.client.wire import ConnectionClosedError, WireConnection, connect

Response = TypeVar("Response")


@contextlib.contextmanager
def admin_connection(
    bootstrap: str,
    timeout_s: float,
    client_id: str,
    error: type[Exception],
    security: ClientSecurity | None = None,
) -> Iterator[WireConnection]:
    """A connection to the first broker of ``bootstrap``, secured as ``security`` says
    (None: PLAINTEXT, as a Kafka client without security settings), closed after.

    Raises ValueError for a bootstrap that is not host:port, OSError when the broker cannot
    be reached, does not answer in time or fails the TLS handshake, AuthenticationFailed
    when it refuses the SASL credentials, and ``error`` when it closes the connection or
    answers something malformed.
    """
    try:
        with connect(bootstrap, timeout_s, client_id=client_id, security=security) as connection:
            yield connection
    except (ConnectionClosedError, MalformedResponseError) as broken:
        # A broker closes the connection on a request version it does not serve.
        raise error(broken_off(bootstrap, "request", broken, security)) from broken


class ConnectionClient:
    """Requests over one connection, used by one thread; an error code in an answer
    raises ``error``, each client's own exception."""

    error: ClassVar[type[Exception]]

    def __init__(self, connection: WireConnection) -> None:
        self._connection = connection

    def _call(
        self, response_type: type[Response], api: tuple[int, int], fields: Mapping[str, object]
    ) -> Response:
        """The answer to the request of ``api`` (key, version) built from ``fields``;
        MalformedResponseError unless it is ``response_type``."""
        api_key, version = api
        return self._connection.call_for(response_type, api_key, version, fields)

    def _check(self, error_code: int, what: str, message: str | None = None) -> None:
        """Raises ``error`` unless ``error_code`` is NONE (``check_answer``)."""
        check_answer(self.error, error_code, what, message)


class BootstrapAdmin(ConnectionClient):
    """An admin client of one connection to the bootstrap broker, opened by ``connected``
    with the client id and read timeout of its command."""

    client_id: ClassVar[str]
    read_timeout_s: ClassVar[float] = 30.0

    @classmethod
    @contextlib.contextmanager
    def connected(
        cls,
        bootstrap: str,
        timeout_s: float | None = None,
        *,
        security: ClientSecurity | None = None,
    ) -> Iterator[Self]:
        """This client on a connection to the first broker of ``bootstrap``, secured as
        ``security`` says (None: PLAINTEXT), read with ``timeout_s`` (None: the client's
        ``read_timeout_s``), closed after.

        Raises ValueError for a bootstrap that is not host:port, OSError when the broker
        cannot be reached or does not answer in time, AuthenticationFailed when it refuses
        the SASL credentials, and ``error`` on an error answer or when the broker closes
        the connection or answers something malformed.
        """
        timeout = cls.read_timeout_s if timeout_s is None else timeout_s
        with admin_connection(bootstrap, timeout, cls.client_id, cls.error, security) as connection:
            yield cls(connection)

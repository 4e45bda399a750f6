"""The one connection an admin command's requests go over (``kshim topics``, ``groups``'
subcommands), through kshim's own blocking client."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from kshim.client.errors import broken_off
from kshim.client.frames import MalformedResponseError
from kshim.client.security import ClientSecurity
from kshim.client.wire import ConnectionClosedError, WireConnection, connect


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

"""Raw connections to the brokers kshim's own suites start, which listen on the loopback.

The client is ``kshim.wire_client``; what the suites add is a connection named by port
alone, with a deadline short enough for a test (a healthy broker answers in milliseconds).
"""

from __future__ import annotations

from kshim.wire_client import ConnectionClosedError, WireConnection

__all__ = ["ConnectionClosedError", "RawConnection"]

LOOPBACK = "127.0.0.1"
TEST_TIMEOUT_S = 5.0


class RawConnection(WireConnection):
    """A ``WireConnection`` to ``127.0.0.1:port``; every read has a ``timeout_s`` deadline."""

    def __init__(self, port: int, timeout_s: float = TEST_TIMEOUT_S) -> None:
        super().__init__(LOOPBACK, port, timeout_s)

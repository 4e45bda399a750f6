"""``kshim gateway`` processes in front of a Kafka, for the compatibility suite's
``gateway`` column (compat_tests/brokers.py): every scenario's verdict through the gateways
is compared with Kafka's own (docs/gateway.md). Each gateway is a process of its own
(``kshim.testing.GatewayProcess``), stopped at the end.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator

from kshim.testing import GatewayProcess


@contextlib.contextmanager
def gateways_in_front(upstream: str, count: int) -> Iterator[str]:
    """``count`` gateways relaying to ``upstream`` until the block ends; yields their
    bootstrap list."""
    with contextlib.ExitStack() as stack:
        directory = stack.enter_context(tempfile.TemporaryDirectory(prefix="kshim-gateway-"))
        gateways = []
        for _ in range(count):
            gateway = GatewayProcess(directory, upstream)
            stack.callback(gateway.stop)
            gateways.append(gateway.start())
        yield ",".join(gateway.bootstrap for gateway in gateways)

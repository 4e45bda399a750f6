"""Kafka behind a ``kshim gateway``: with ``KSHIM_COMPAT_VIA_GATEWAY=1`` the suite's Kafka
is reached through a gateway started in front of it (``kshim.testing.GatewayProcess``, a
process of its own stopped at the end), so that every scenario's verdict on Kafka through
the gateway can be compared with Kafka's own (docs/gateway.md).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator

from kshim.testing import GatewayProcess

VIA_GATEWAY_VARIABLE = "KSHIM_COMPAT_VIA_GATEWAY"


def via_gateway() -> bool:
    return os.environ.get(VIA_GATEWAY_VARIABLE, "") == "1"


@contextlib.contextmanager
def gateway_in_front(upstream: str) -> Iterator[str]:
    """A gateway relaying to ``upstream`` until the block ends; yields its bootstrap."""
    with tempfile.TemporaryDirectory(prefix="kshim-gateway-") as directory:
        gateway = GatewayProcess(directory, upstream).start()
        try:
            yield gateway.bootstrap
        finally:
            gateway.stop()

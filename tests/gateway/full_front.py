"""Two gateways with ``--full`` in front of one Kafka, standing in for kshim's broker in the
broker's own full-data view tests (test_gateway_full_e2e.py, test_gateway_full_spark.py)."""

from __future__ import annotations

from pathlib import Path

from kshim.testing import GatewayProcess
from tests.gateway.delay_clients import unique, wait_for_log

SERVING = "serving full-data views"


class GatewayFront:
    """Two gateways with ``--full`` in front of one Kafka, with BrokerProcess's interface
    for the broker's tests: ``bootstrap`` names both; ``kill``, ``stop`` and ``start`` act
    on both (the cluster keeps running)."""

    def __init__(self, log_dir: Path, upstream: str) -> None:
        options = ["--full", "--full-group", unique("full-e2e")]
        options += ["--full-session-timeout-ms", "1000"]
        self.gateways = [GatewayProcess(log_dir, upstream, options=options) for _ in range(2)]

    @property
    def bootstrap(self) -> str:
        return ",".join(gateway.bootstrap for gateway in self.gateways)

    def start(self) -> GatewayFront:
        """Starts the gateways not running, on their ports; returns once each serves."""
        for gateway in self.gateways:
            if gateway.is_running():
                continue
            before = gateway.log_text().count(SERVING)
            gateway.start()
            wait_for_log(gateway, SERVING, count=before + 1)
        return self

    def kill(self) -> None:
        for gateway in self.gateways:
            gateway.kill()

    def stop(self) -> None:
        for gateway in self.gateways:
            gateway.stop()

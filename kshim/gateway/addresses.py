"""Which gateway address stands for which upstream broker, and where each broker is.

Port per broker, as Kroxylicious's port-per-broker scheme maps a cluster: the bootstrap
port is the one the gateway was told to listen on, and upstream broker ``n`` is reached at
``broker_port_base + n``. Every gateway run with the same ports and a different host maps
the cluster the same way, so any of them can serve any client.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_PORT = 65535


class UnmappableBroker(Exception):
    """An upstream broker whose node id has no gateway port (the range ends at 65535)."""


@dataclass(frozen=True, slots=True)
class GatewayPorts:
    """The gateway's own addresses: ``host`` is what answers name (the advertised host)."""

    host: str
    bootstrap_port: int
    broker_port_base: int

    def port_of(self, node_id: int) -> int:
        """The gateway port standing for upstream broker ``node_id``; raises
        UnmappableBroker when there is none."""
        port = self.broker_port_base + node_id
        if node_id < 0 or port > MAX_PORT or port == self.bootstrap_port:
            raise UnmappableBroker(
                f"upstream broker {node_id} has no gateway port "
                f"(ports from {self.broker_port_base}, bootstrap {self.bootstrap_port})"
            )
        return port


@dataclass(slots=True)
class Topology:
    """The upstream brokers' own addresses by node id, as the last answers named them."""

    brokers: dict[int, tuple[str, int]] = field(default_factory=dict)

    def learn(self, node_id: int, host: str, port: int) -> bool:
        """Records a broker's address; returns whether the node id is new."""
        new = node_id not in self.brokers
        self.brokers[node_id] = (host, port)
        return new

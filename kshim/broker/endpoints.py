"""Where each listener is advertised (Metadata's broker entry, FindCoordinator's node):
computed once from the configuration, and told the bound port of a listener configured
with port 0, whose real port exists only once it listens."""

from __future__ import annotations

from kshim.broker.config.broker_config import BrokerConfig


class Endpoints:
    def __init__(self, config: BrokerConfig) -> None:
        self._advertised = config.advertised_addresses()
        self._first = next(iter(config.listeners())).name

    def bound(self, listener: str, port: int) -> None:
        """The listener listens on ``port``: an advertised port 0 becomes that port."""
        host, advertised_port = self._advertised[listener]
        if advertised_port == 0:
            self._advertised[listener] = (host, port)

    def address(self, listener: str) -> tuple[str, int]:
        """The advertised address of the listener a client came through (Kafka answers
        each client with the endpoints of its own listener)."""
        found = self._advertised.get(listener)
        return found if found is not None else self._advertised[self._first]

"""What a handler gets besides its request."""

from __future__ import annotations

from dataclasses import dataclass

from kshim.broker.broker import Broker
from kshim.protocol.headers import RequestHeader


@dataclass(frozen=True, slots=True)
class RequestContext:
    header: RequestHeader
    broker: Broker
    client_host: str = ""  # the peer as Kafka reports it ("/127.0.0.1"), for DescribeGroups

    @property
    def version(self) -> int:
        return self.header.api_version

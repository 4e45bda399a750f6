"""What a handler gets besides its request."""

from __future__ import annotations

from dataclasses import dataclass, field

from kshim.broker.broker import Broker
from kshim.broker.security.session import Session
from kshim.protocol.headers import RequestHeader


@dataclass(frozen=True, slots=True)
class RequestContext:
    header: RequestHeader
    broker: Broker
    client_host: str = ""  # the peer as Kafka reports it ("/127.0.0.1"), for DescribeGroups
    # The connection's listener and principal (security/session.py); one per connection,
    # changed only by the SASL handlers.
    session: Session = field(default_factory=Session)

    @property
    def version(self) -> int:
        return self.header.api_version

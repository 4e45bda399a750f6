"""What a handler gets besides its request."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic

from typing_extensions import TypeVar

from kshim.broker.broker import Broker
from kshim.broker.security.session import Session
from kshim.protocol.headers import RequestHeader

# The broker's services a handler uses. Each handler names the few it reads in a Protocol
# of read-only properties (api/services.py, one per service, combined in its domain's
# services.py), which Broker satisfies structurally; the route table passes the Broker,
# accepted by covariance, and a test can hand a handler those services and nothing else.
# Access rules take the default.
Services_co = TypeVar("Services_co", covariant=True, default=Broker)


@dataclass(frozen=True, slots=True)
class RequestContext(Generic[Services_co]):
    header: RequestHeader
    broker: Services_co
    client_host: str = ""  # the peer as Kafka reports it ("/127.0.0.1"), for DescribeGroups
    # The connection's listener and principal (security/session.py); one per connection,
    # changed only by the SASL handlers.
    session: Session = field(default_factory=Session)

    @property
    def version(self) -> int:
        return self.header.api_version

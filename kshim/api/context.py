"""What a handler gets besides its request."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic

from typing_extensions import TypeVar

from kshim.broker.broker import Broker
from kshim.broker.security.session import Session
from kshim.protocol.headers import RequestHeader

# The broker's services a handler uses. A handler names the few it needs in a Protocol
# (records/produce.py: the partition service alone), which Broker satisfies, so a test can
# hand it those services and nothing else; the others take the whole Broker.
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

"""What SaslHandshake reads of the broker, as a Protocol the Broker satisfies
(api/services.py names each service; the ACL APIs read the ACLs alone, the SCRAM APIs the
credentials alone, SaslAuthenticate only its connection's session)."""

from __future__ import annotations

from typing import Protocol

from kshim.api.services import WithConfig, WithCredentials


class HandshakeServices(WithCredentials, WithConfig, Protocol):
    """SaslHandshake's: the credentials and the configuration (the enabled mechanisms)."""

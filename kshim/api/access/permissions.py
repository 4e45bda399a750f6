"""What one request's principal may do, in the words of Kafka's AuthHelper.

A topic's special names are decided by their stored topic's ACLs (``base_topic``): the
view ``T.full`` by ``T``'s READ and DESCRIBE, the delay companion ``T.delay`` by ``T``'s
WRITE and DESCRIBE. An operator writes ACLs for ``T`` alone, and a client may read or
write what lies behind ``T``'s special names exactly when it may read or write ``T``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kshim.broker.security.acls.service import Acls
from kshim.broker.topic_resolver import base_topic
from kshim.protocol.acls import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    Operation,
    ResourceType,
    operations_bitfield,
)

# Kafka's messages for its authorisation errors (Errors.java), where it sends them.
TOPIC_REFUSED = "Topic authorization failed."
GROUP_REFUSED = "Group authorization failed."
CLUSTER_REFUSED = "Cluster authorization failed."
TRANSACTIONAL_ID_REFUSED = "Transactional Id authorization failed."


@dataclass(frozen=True, slots=True)
class Permissions:
    """The authoriser's answers for one request's principal, connected from ``host``.
    Made only for requests that ACLs apply to (guard.py); event-loop thread only."""

    acls: Acls
    principal: str
    host: str

    def allows(self, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        return self.acls.authorize(self.principal, self.host, operation, resource_type, name)

    def allows_topic(self, operation: Operation, name: str) -> bool:
        """Whether ``operation`` is allowed on the topic ``name``, a special name deciding
        by its stored topic's ACLs (module docstring)."""
        return self.allows(operation, ResourceType.TOPIC, base_topic(name))

    def allows_group(self, operation: Operation, group_id: str) -> bool:
        return self.allows(operation, ResourceType.GROUP, group_id)

    def allows_transactional_id(self, operation: Operation, transactional_id: str) -> bool:
        return self.allows(operation, ResourceType.TRANSACTIONAL_ID, transactional_id)

    def allows_cluster(self, operation: Operation) -> bool:
        return self.allows(operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def allows_some(self, operation: Operation, resource_type: ResourceType) -> bool:
        """Whether ``operation`` is allowed on at least one resource of the type (Kafka's
        authorizeByResourceType)."""
        return self.acls.authorize_any(self.principal, self.host, operation, resource_type)

    def topics(self, operation: Operation, names: Iterable[str]) -> frozenset[str]:
        """The names among ``names`` whose topics allow ``operation``, each asked about once
        (Kafka's filterByAuthorized)."""
        return frozenset(name for name in set(names) if self.allows_topic(operation, name))

    def operations(self, resource_type: ResourceType, name: str) -> int:
        """KIP-430's bitfield of the operations the type supports that are allowed on the
        resource ``name`` (Kafka's AuthHelper.authorizedOperations); a topic's special
        names decide by their stored topic's ACLs, as every other check does."""
        if resource_type == ResourceType.TOPIC:
            name = base_topic(name)
        allowed = (
            operation
            for operation in SUPPORTED_OPERATIONS[resource_type]
            if self.allows(operation, resource_type, name)
        )
        return operations_bitfield(allowed)

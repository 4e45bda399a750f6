"""How ACLs decide an action, as Kafka's StandardAuthorizer does (StandardAuthorizerData
.findAclRule and .findResult), and the index that finds a resource's ACLs quickly.

For one action (principal, host, operation, resource) the ACLs that count are those
whose pattern covers the resource: its literal name, the literal wildcard ``*`` of its
type, and every prefix pattern its name starts with. Of those:

- one that matches the principal (itself or ``User:*``), the host (the client's IP or
  ``*``) and the operation, and DENYs, denies the action, whatever else allows it;
- otherwise one that matches and ALLOWs allows it;
- otherwise the action is denied if the resource has any ACL at all, of any principal,
  host or operation; only a resource without one gets ``allow.everyone.if.no.acl.found``.

An ACL for operation ALL matches every operation. An ALLOW for READ, WRITE, DELETE or
ALTER also allows DESCRIBE, and one for ALTER_CONFIGS also DESCRIBE_CONFIGS; a DENY
denies only the operation it names (a DENY READ does not deny DESCRIBE).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from kshim.protocol.acls import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

IMPLIES_DESCRIBE = frozenset(
    {Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}
)
IMPLIES_DESCRIBE_CONFIGS = frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS})


def verdict(acl: AclBinding, principal: str, host: str, operation: Operation) -> Permission | None:
    """ALLOW or DENY when ``acl`` (whose pattern covers the resource) matches the action,
    None when it does not apply to it."""
    if acl.principal not in (principal, WILDCARD_PRINCIPAL):
        return None
    if acl.host not in (WILDCARD, host):
        return None
    if acl.operation != Operation.ALL and not _operation_matches(acl, operation):
        return None
    return Permission.ALLOW if acl.permission == Permission.ALLOW else Permission.DENY


def _operation_matches(acl: AclBinding, operation: Operation) -> bool:
    if acl.permission != Permission.ALLOW:
        return acl.operation == operation
    if operation == Operation.DESCRIBE:
        return acl.operation in IMPLIES_DESCRIBE
    if operation == Operation.DESCRIBE_CONFIGS:
        return acl.operation in IMPLIES_DESCRIBE_CONFIGS
    return acl.operation == operation


def decide(
    covering: Iterable[AclBinding],
    principal: str,
    host: str,
    operation: Operation,
    allow_if_no_acl: bool,
) -> bool:
    """Whether the ACLs ``covering`` a resource let ``principal`` from ``host`` do
    ``operation`` on it (the module's rules; super users are the caller's)."""
    resource_has_acls = allowed = False
    for acl in covering:
        resource_has_acls = True
        found = verdict(acl, principal, host, operation)
        if found == Permission.DENY:
            return False
        allowed = allowed or found == Permission.ALLOW
    return allowed or (not resource_has_acls and allow_if_no_acl)


def allows_some(
    of_type: Iterable[AclBinding], principal: str, host: str, operation: Operation
) -> bool:
    """Whether the ACLs of one resource type allow ``operation`` on at least one resource
    of it that none denies, as Kafka's Authorizer.authorizeByResourceType does after its
    check of one made-up name: an ALLOW of the operation (or ALL) for the principal and
    host on the wildcard, on a literal name no literal or prefix DENY covers, or on a
    prefix no shorter-or-equal prefix DENY covers. Implied operations do not count here,
    as in Kafka; a DENY on the wildcard denies every resource."""
    denied: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
    allowed: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
    for acl in of_type:
        if acl.host not in (WILDCARD, host) or acl.principal not in (principal, WILDCARD_PRINCIPAL):
            continue
        if acl.operation not in (operation, Operation.ALL):
            continue
        wildcard = acl.pattern_type == PatternType.LITERAL and acl.resource_name == WILDCARD
        if acl.permission == Permission.DENY and wildcard:
            return False
        chosen = denied if acl.permission == Permission.DENY else allowed
        chosen.setdefault(acl.pattern_type, set()).add(acl.resource_name)
    if WILDCARD in allowed[PatternType.LITERAL]:
        return True
    denied_prefixes = denied[PatternType.PREFIXED]
    for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
        for name in allowed[pattern_type]:
            if pattern_type == PatternType.LITERAL and name in denied[PatternType.LITERAL]:
                continue
            if not any(name[:length] in denied_prefixes for length in range(1, len(name) + 1)):
                return True
    return False


class AclIndex:
    """A fixed set of bindings, indexed by resource type, then literal name and prefix, so
    that the ACLs covering one resource are found with a few dictionary lookups however
    many ACLs there are. Never changed once built: a change builds a new index."""

    def __init__(self, bindings: Iterable[AclBinding]) -> None:
        self.bindings = frozenset(bindings)
        self._literal: dict[ResourceType, dict[str, list[AclBinding]]] = {}
        self._prefixed: dict[ResourceType, dict[str, list[AclBinding]]] = {}
        self._of_type: dict[ResourceType, list[AclBinding]] = {}
        for binding in sorted(self.bindings, key=sort_key):
            self._of_type.setdefault(binding.resource_type, []).append(binding)
            by_name = (
                self._literal if binding.pattern_type == PatternType.LITERAL else self._prefixed
            )
            names = by_name.setdefault(binding.resource_type, {})
            names.setdefault(binding.resource_name, []).append(binding)
        # Each type's distinct prefix lengths: a name is looked up cut at each of them.
        self._prefix_lengths = {
            resource_type: sorted({len(prefix) for prefix in prefixes})
            for resource_type, prefixes in self._prefixed.items()
        }

    def covering(self, resource_type: ResourceType, name: str) -> Iterator[AclBinding]:
        """Every binding whose pattern covers the resource ``name`` of ``resource_type``."""
        literal = self._literal.get(resource_type, {})
        yield from literal.get(name, ())
        if name != WILDCARD:
            yield from literal.get(WILDCARD, ())
        prefixed = self._prefixed.get(resource_type, {})
        for length in self._prefix_lengths.get(resource_type, ()):
            if length > len(name):
                break
            yield from prefixed.get(name[:length], ())

    def of_type(self, resource_type: ResourceType) -> Sequence[AclBinding]:
        return self._of_type.get(resource_type, ())


def sort_key(binding: AclBinding) -> tuple[int, str, int, str, str, int, int]:
    """The order bindings are listed in: by resource, then principal, host, operation."""
    return (
        binding.resource_type,
        binding.resource_name,
        binding.pattern_type,
        binding.principal,
        binding.host,
        binding.operation,
        binding.permission,
    )

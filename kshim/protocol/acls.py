"""Kafka's ACL vocabulary: resource and pattern types, operations, permissions, a binding
and a filter, with Kafka's codes and its rules for what a filter matches.

The codes are those of Kafka's ResourceType, PatternType, AclOperation and
AclPermissionType, as the CreateAcls, DescribeAcls and DeleteAcls APIs carry them; a
code Kafka does not know reads as UNKNOWN (``from_code``), as its ``fromCode`` does.
As in Kafka, where these classes live in the clients library (org.apache.kafka.common.acl
and common.resource), the broker's authoriser and the admin client share them; how the
broker decides an action by them and stores them is in kshim/broker/security/acls/.
Which bindings and filters a broker refuses (``binding_problem``, ``filter_problem``)
are Kafka's AclControlManager checks, kept here beside the types they check.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

CLUSTER_NAME = "kafka-cluster"  # the one name of the CLUSTER resource (Resource.CLUSTER_NAME)
WILDCARD = "*"  # a literal resource name or a host matching every one
WILDCARD_PRINCIPAL = "User:*"  # the principal matching every principal


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1  # a filter's: any pattern type, the name matched exactly
    MATCH = 2  # a filter's: every pattern that would match the name (KIP-290)
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# The operations an ACL can grant on each resource type (Kafka's AclEntry.
# supportedOperations, as of Kafka 4.0: groups take config operations since KIP-848).
# ``kshim acls`` refuses others; KIP-430's authorized-operations fields list these, one
# bit each at the operation's code.
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[Operation]] = {
    ResourceType.TOPIC: frozenset(
        {
            Operation.READ,
            Operation.WRITE,
            Operation.CREATE,
            Operation.DESCRIBE,
            Operation.DELETE,
            Operation.ALTER,
            Operation.DESCRIBE_CONFIGS,
            Operation.ALTER_CONFIGS,
        }
    ),
    ResourceType.GROUP: frozenset(
        {
            Operation.READ,
            Operation.DESCRIBE,
            Operation.DELETE,
            Operation.DESCRIBE_CONFIGS,
            Operation.ALTER_CONFIGS,
        }
    ),
    ResourceType.CLUSTER: frozenset(
        {
            Operation.CREATE,
            Operation.CLUSTER_ACTION,
            Operation.DESCRIBE_CONFIGS,
            Operation.ALTER_CONFIGS,
            Operation.IDEMPOTENT_WRITE,
            Operation.ALTER,
            Operation.DESCRIBE,
        }
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset({Operation.DESCRIBE, Operation.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({Operation.DESCRIBE}),
    ResourceType.USER: frozenset({Operation.CREATE_TOKENS, Operation.DESCRIBE_TOKENS}),
}


def operations_bitfield(operations: Iterable[Operation]) -> int:
    """KIP-430's int32 of operations: bit ``code`` set for each (Kafka's
    Utils.to32BitField)."""
    bits = 0
    for operation in operations:
        bits |= 1 << operation
    return bits


_EVERY_OPERATION = {
    resource_type: operations_bitfield(operations)
    for resource_type, operations in SUPPORTED_OPERATIONS.items()
}


def all_supported(resource_type: ResourceType) -> int:
    """The bitfield of every operation the type supports: what Kafka answers without an
    authoriser, or for a super user."""
    return _EVERY_OPERATION[resource_type]


CodeT = TypeVar("CodeT", ResourceType, PatternType, Operation, Permission)


def from_code(kind: type[CodeT], code: int) -> CodeT:
    """The member of ``kind`` with Kafka's ``code``; UNKNOWN for a code Kafka lacks."""
    try:
        return kind(code)
    except ValueError:
        return kind(0)


def is_principal(text: str) -> bool:
    """Whether ``text`` is a principal as Kafka parses one (SecurityUtils.
    parseKafkaPrincipal): ``principalType:name``, split at the first colon."""
    principal_type, colon, _ = text.partition(":")
    return bool(colon and principal_type)


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: a resource pattern and an access control entry (Kafka's AclBinding)."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    @classmethod
    def from_codes(
        cls,
        *,
        resource_type: int,
        resource_name: str,
        pattern_type: int,
        principal: str,
        host: str,
        operation: int,
        permission: int,
    ) -> AclBinding:
        """The binding of the seven fields CreateAcls, DescribeAcls and DeleteAcls carry
        (and the ACL store keeps), a code Kafka does not know read as UNKNOWN."""
        return cls(
            from_code(ResourceType, resource_type),
            resource_name,
            from_code(PatternType, pattern_type),
            principal,
            host,
            from_code(Operation, operation),
            from_code(Permission, permission),
        )

    def pattern_matches(self, name: str) -> bool:
        """Whether this binding's resource pattern covers the resource ``name`` (of its
        type): a literal name exactly, the literal ``*`` every name, a prefix every name
        that starts with it."""
        if self.pattern_type == PatternType.LITERAL:
            return self.resource_name in (name, WILDCARD)
        return self.pattern_type == PatternType.PREFIXED and name.startswith(self.resource_name)


@dataclass(frozen=True, slots=True)
class AclFilter:
    """Which bindings DescribeAcls lists and DeleteAcls deletes (Kafka's AclBindingFilter):
    a name, principal or host of None matches any, ANY any type, operation or permission.
    The default filter matches every binding."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def matches(self, binding: AclBinding) -> bool:
        return self._pattern_matches(binding) and self._entry_matches(binding)

    def _pattern_matches(self, binding: AclBinding) -> bool:
        """ResourcePatternFilter.matches: MATCH takes every pattern that would match the
        name (literal, wildcard or prefix); ANY or a pattern type takes the name as is."""
        if self.resource_type not in (ResourceType.ANY, binding.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, binding.pattern_type):
            return False
        if self.resource_name is None:
            return True
        if self.pattern_type != PatternType.MATCH:
            return self.resource_name == binding.resource_name
        return binding.pattern_matches(self.resource_name)

    def _entry_matches(self, binding: AclBinding) -> bool:
        """AccessControlEntryFilter.matches: principal and host compared as strings, so
        a filter for ``User:*`` finds the wildcard ACLs, not every one."""
        return (
            self.principal in (None, binding.principal)
            and self.host in (None, binding.host)
            and self.operation in (Operation.ANY, binding.operation)
            and self.permission in (Permission.ANY, binding.permission)
        )


def binding_problem(binding: AclBinding) -> str | None:
    """Why CreateAcls refuses ``binding`` with INVALID_REQUEST, or None: the checks of
    Kafka's AclControlManager.validateNewAcl and AclApis.handleCreateAcls."""
    if binding.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {binding.resource_type.name}"
    if binding.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {binding.pattern_type.name}"
    if binding.operation in (Operation.UNKNOWN, Operation.ANY):
        return f"Invalid operation {binding.operation.name}"
    if binding.permission not in (Permission.DENY, Permission.ALLOW):
        return f"Invalid permissionType {binding.permission.name}"
    if not binding.resource_name:
        return "Invalid empty resource name"
    if binding.resource_type == ResourceType.CLUSTER and binding.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not is_principal(binding.principal):
        return f"Could not parse principal {binding.principal!r}: expected principalType:name"
    return None


def filter_problem(acl_filter: AclFilter) -> str | None:
    """Why DescribeAcls or DeleteAcls refuses ``acl_filter`` with INVALID_REQUEST, or None:
    a filter with an UNKNOWN part (AclControlManager.validateFilter)."""
    if acl_filter.resource_type == ResourceType.UNKNOWN:
        return "Unknown patternFilter: resource type UNKNOWN"
    if acl_filter.pattern_type == PatternType.UNKNOWN:
        return "Unknown patternFilter: pattern type UNKNOWN"
    if acl_filter.operation == Operation.UNKNOWN:
        return "Unknown entryFilter: operation UNKNOWN"
    if acl_filter.permission == Permission.UNKNOWN:
        return "Unknown entryFilter: permission type UNKNOWN"
    return None

"""The broker's authoriser: Kafka's StandardAuthorizer over ACLs kept in LMDB.

Configured as Kafka's is: ``authorizer.class.name`` switches it on (empty: every action
is allowed and the ACL APIs answer SECURITY_DISABLED), ``super.users`` (``User:a;User:b``)
may do anything, and ``allow.everyone.if.no.acl.found`` decides a resource that has no
ACL at all (default false: denied). The rules themselves are in matching.py.

Threads: ``authorize`` and ``authorize_any`` run on the event loop, per request and per
resource, and only read. ``create`` and ``delete`` block on an fsynced LMDB commit, so
handlers call them in a worker thread; they are serialised by a lock, and each ends by
swapping in a new, never-changed index with its own empty memo of decisions, in one
assignment, so a reader sees the ACLs before a change or after it, never half of it, and
a decision made on old ACLs is remembered only in the old memo.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.security.acls.matching import AclIndex, allows_some, decide, sort_key
from kshim.broker.security.acls.records import from_record, to_record
from kshim.protocol.acls import (
    CLUSTER_NAME,
    AclBinding,
    AclFilter,
    Operation,
    ResourceType,
    binding_problem,
    filter_problem,
)
from kshim.protocol.errors import ErrorCode
from kshim.storage.meta.acl_store import AclStore

# Authorizer.authorizeByResourceType first decides one made-up resource name, so that a
# super user, a matching wildcard or prefix ACL, or allow.everyone.if.no.acl.found on a
# type without ACLs answers as for any resource.
PROBE_NAME = "hardcode"
# Decisions remembered per index before the memo starts again (one entry per principal,
# host, operation and resource asked about).
MAX_REMEMBERED = 100_000
NOT_CONCRETE_OPERATIONS = (Operation.ANY, Operation.UNKNOWN)
NOT_CONCRETE_TYPES = (ResourceType.ANY, ResourceType.UNKNOWN)
NO_AUTHORIZER = "No Authorizer is configured."
CLUSTER_REFUSED = "Cluster authorization failed."

DecisionKey = tuple[str, str, Operation, ResourceType, str | None]
Answer = tuple[ErrorCode, str | None]  # an error code and its message


@dataclass(frozen=True, slots=True)
class DeleteResult:
    """What one DeleteAcls filter did: the bindings it matched, all deleted."""

    error_code: ErrorCode
    error_message: str | None
    deleted: list[AclBinding]


@dataclass(slots=True)
class _Snapshot:
    index: AclIndex
    decisions: dict[DecisionKey, bool] = field(default_factory=dict)

    def remember(self, key: DecisionKey, allowed: bool) -> bool:
        if len(self.decisions) >= MAX_REMEMBERED:
            self.decisions.clear()
        self.decisions[key] = allowed
        return allowed


def super_users(value: str) -> frozenset[str]:
    """The principals of ``super.users``, semicolon separated as in Kafka."""
    return frozenset(name.strip() for name in value.split(";") if name.strip())


class Acls:
    def __init__(self, store: AclStore, config: BrokerConfig) -> None:
        """Reads every stored binding (blocking, at start-up)."""
        self._store = store
        self.enabled = bool(config.values["authorizer.class.name"].strip())
        self._super_users = super_users(config.values["super.users"])
        self._allow_if_no_acl = config.get_bool("allow.everyone.if.no.acl.found")
        self._lock = threading.Lock()
        bindings = (from_record(record) for record in store.load())
        self._snapshot = _Snapshot(AclIndex(bindings))

    def is_super(self, principal: str) -> bool:
        return principal in self._super_users

    def authorize(
        self,
        principal: str,
        host: str,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        """Whether ``principal`` connected from ``host`` (an IP address) may do
        ``operation`` on the resource ``name`` of ``resource_type``; always True while no
        authoriser is configured."""
        if not self.enabled or principal in self._super_users:
            return True
        snapshot = self._snapshot
        key = (principal, host, operation, resource_type, name)
        known = snapshot.decisions.get(key)
        if known is not None:
            return known
        covering = snapshot.index.covering(resource_type, name)
        allowed = decide(covering, principal, host, operation, self._allow_if_no_acl)
        return snapshot.remember(key, allowed)

    def authorize_any(
        self, principal: str, host: str, operation: Operation, resource_type: ResourceType
    ) -> bool:
        """Whether ``principal`` from ``host`` may do ``operation`` on at least one
        resource of ``resource_type`` (Kafka's Authorizer.authorizeByResourceType; KIP-679
        takes WRITE on some topic as IDEMPOTENT_WRITE). Raises ValueError for an operation
        or type that is not a concrete one (ANY, UNKNOWN)."""
        if operation in NOT_CONCRETE_OPERATIONS or resource_type in NOT_CONCRETE_TYPES:
            raise ValueError(f"not a concrete operation and type: {operation!r} {resource_type!r}")
        if self.authorize(principal, host, operation, resource_type, PROBE_NAME):
            return True
        snapshot = self._snapshot
        key = (principal, host, operation, resource_type, None)
        known = snapshot.decisions.get(key)
        if known is not None:
            return known
        of_type = snapshot.index.of_type(resource_type)
        return snapshot.remember(key, allows_some(of_type, principal, host, operation))

    def refusal(self, principal: str, host: str, operation: Operation) -> Answer | None:
        """Why an ACL API is refused to ``principal`` from ``host``, or None: as Kafka's
        AclApis, SECURITY_DISABLED without an authoriser, CLUSTER_AUTHORIZATION_FAILED
        without ``operation`` on the cluster (DESCRIBE to list ACLs, ALTER to change
        them)."""
        if not self.enabled:
            return ErrorCode.security_disabled, NO_AUTHORIZER
        if not self.authorize(principal, host, operation, ResourceType.CLUSTER, CLUSTER_NAME):
            return ErrorCode.cluster_authorization_failed, CLUSTER_REFUSED
        return None

    def create(self, bindings: Sequence[AclBinding]) -> list[Answer]:
        """Adds the valid ``bindings`` in one fsynced commit (one already there is kept
        once); returns each binding's (error code, message): INVALID_REQUEST for one
        Kafka refuses (binding_problem), NONE otherwise. Blocks."""
        results: list[Answer] = []
        valid: list[AclBinding] = []
        for binding in bindings:
            problem = binding_problem(binding)
            results.append(
                (ErrorCode.invalid_request, problem) if problem else (ErrorCode.none, None)
            )
            if problem is None:
                valid.append(binding)
        with self._lock:
            current = self._snapshot.index.bindings
            added = [binding for binding in dict.fromkeys(valid) if binding not in current]
            if added:
                self._store.add(to_record(binding) for binding in added)
                self._replace(current.union(added))
        return results

    def describe(self, acl_filter: AclFilter) -> list[AclBinding]:
        """The bindings ``acl_filter`` matches, by resource then principal, host and
        operation."""
        return _matching(self._snapshot.index.bindings, acl_filter)

    def delete(self, filters: Sequence[AclFilter]) -> list[DeleteResult]:
        """Deletes every binding one of the valid ``filters`` matches, in one fsynced
        commit; returns per filter the bindings it matched (a binding two filters match
        is listed by both), or INVALID_REQUEST for a filter with an UNKNOWN part. Blocks."""
        results: list[DeleteResult] = []
        with self._lock:
            current = self._snapshot.index.bindings
            doomed: set[AclBinding] = set()
            for acl_filter in filters:
                problem = filter_problem(acl_filter)
                if problem is not None:
                    results.append(DeleteResult(ErrorCode.invalid_request, problem, []))
                    continue
                matched = _matching(current, acl_filter)
                doomed.update(matched)
                results.append(DeleteResult(ErrorCode.none, None, matched))
            if doomed:
                self._store.remove(to_record(binding) for binding in doomed)
                self._replace(current.difference(doomed))
        return results

    def _replace(self, bindings: Iterable[AclBinding]) -> None:
        self._snapshot = _Snapshot(AclIndex(bindings))


def _matching(bindings: Iterable[AclBinding], acl_filter: AclFilter) -> list[AclBinding]:
    return sorted((binding for binding in bindings if acl_filter.matches(binding)), key=sort_key)

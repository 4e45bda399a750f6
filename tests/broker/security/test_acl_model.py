"""Kafka's ACL rules as kshim's authoriser applies them (security/acls/): examples of each
rule of StandardAuthorizer, then properties against a plain reading of those rules over a
small universe of names, principals and hosts, where prefixes, wildcards and denials meet
often."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.security.acls.service import Acls
from kshim.protocol.acls import (
    CLUSTER_NAME,
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    binding_problem,
    filter_problem,
    from_code,
)
from kshim.protocol.errors import ErrorCode
from kshim.storage.meta.metadata import MetadataStore

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ALICE, BOB, EVERYONE = "User:alice", "User:bob", "User:*"
HOST, OTHER_HOST = "10.0.0.1", "10.0.0.2"
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY
READ, WRITE, DESCRIBE = Operation.READ, Operation.WRITE, Operation.DESCRIBE
EXAMPLES = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def acl(
    name: str,
    operation: Operation = READ,
    permission: Permission = ALLOW,
    principal: str = ALICE,
    host: str = "*",
    pattern_type: PatternType = LITERAL,
    resource_type: ResourceType = TOPIC,
) -> AclBinding:
    return AclBinding(resource_type, name, pattern_type, principal, host, operation, permission)


class Authoriser:
    """An Acls over a metadata store of its own, configured as a Kafka broker would be."""

    def __init__(self, directory: Path, **settings: str) -> None:
        self.store = MetadataStore(str(directory))
        values = {"log.dirs": str(directory), "authorizer.class.name": STANDARD_AUTHORIZER}
        values.update({key.replace("_", "."): value for key, value in settings.items()})
        self.acls = Acls(self.store.acls, BrokerConfig.load([values]))

    def with_acls(self, *bindings: AclBinding) -> Acls:
        assert self.acls.create(bindings) == [(ErrorCode.none, None)] * len(bindings)
        return self.acls

    def close(self) -> None:
        self.store.close()


@pytest.fixture
def authoriser(tmp_path: Path) -> Iterator[Authoriser]:
    opened = Authoriser(tmp_path / "meta")
    yield opened
    opened.close()


def allowed(acls: Acls, operation: Operation, name: str, principal: str = ALICE) -> bool:
    return acls.authorize(principal, HOST, operation, TOPIC, name)


def test_no_acl_on_a_resource_denies_unless_allow_everyone(tmp_path: Path) -> None:
    strict = Authoriser(tmp_path / "strict")
    lenient = Authoriser(tmp_path / "lenient", allow_everyone_if_no_acl_found="true")
    try:
        assert not allowed(strict.acls, READ, "orders")
        assert allowed(lenient.acls, READ, "orders")
        # Any ACL on the resource, even another principal's, ends the default.
        lenient.with_acls(acl("orders", principal=BOB))
        assert not allowed(lenient.acls, READ, "orders")
        assert allowed(lenient.acls, READ, "payments")
    finally:
        strict.close()
        lenient.close()


def test_without_an_authoriser_everything_is_allowed(tmp_path: Path) -> None:
    store = MetadataStore(str(tmp_path / "meta"))
    try:
        acls = Acls(store.acls, BrokerConfig.load([{"log.dirs": str(tmp_path)}]))
        assert not acls.enabled
        acls.create([acl("orders", permission=DENY)])
        assert allowed(acls, READ, "orders")
        assert acls.authorize_any(ALICE, HOST, WRITE, TOPIC)
    finally:
        store.close()


def test_super_users_may_do_anything_despite_a_deny(tmp_path: Path) -> None:
    opened = Authoriser(tmp_path / "meta", super_users=" User:admin ; User:ops")
    try:
        acls = opened.with_acls(acl("orders", Operation.ALL, DENY, EVERYONE))
        assert acls.is_super("User:admin") and acls.is_super("User:ops")
        assert not acls.is_super(ALICE)
        assert allowed(acls, WRITE, "orders", "User:admin")
        assert acls.authorize_any("User:ops", HOST, WRITE, TOPIC)
        assert not allowed(acls, WRITE, "orders")
    finally:
        opened.close()


def test_literal_wildcard_and_prefixed_patterns(authoriser: Authoriser) -> None:
    acls = authoriser.with_acls(
        acl("orders"), acl("*", Operation.CREATE), acl("pay", DESCRIBE, pattern_type=PREFIXED)
    )
    assert allowed(acls, READ, "orders")
    assert not allowed(acls, READ, "orders2")  # a literal name is not a prefix
    assert allowed(acls, Operation.CREATE, "anything")
    assert allowed(acls, DESCRIBE, "payments")
    assert allowed(acls, DESCRIBE, "pay")
    assert not allowed(acls, DESCRIBE, "pa")


def test_principal_and_host_must_match_or_be_wildcards(authoriser: Authoriser) -> None:
    acls = authoriser.with_acls(
        acl("orders", principal=BOB, host=HOST), acl("shared", principal=EVERYONE)
    )
    assert acls.authorize(BOB, HOST, READ, TOPIC, "orders")
    assert not acls.authorize(BOB, OTHER_HOST, READ, TOPIC, "orders")
    assert not acls.authorize(ALICE, HOST, READ, TOPIC, "orders")
    assert acls.authorize("User:carol", OTHER_HOST, READ, TOPIC, "shared")


def test_deny_wins_over_allow_from_any_pattern(authoriser: Authoriser) -> None:
    acls = authoriser.with_acls(
        acl("*", Operation.ALL),
        acl("secret", pattern_type=PREFIXED, permission=DENY, principal=EVERYONE),
    )
    assert allowed(acls, READ, "orders")
    assert not allowed(acls, READ, "secret-plans")
    assert allowed(acls, WRITE, "secret-plans")  # the DENY names READ only


def test_implied_operations_come_from_allows_only(authoriser: Authoriser) -> None:
    acls = authoriser.with_acls(
        acl("read", READ),
        acl("written", WRITE),
        acl("altered", Operation.ALTER_CONFIGS),
        acl("denied", READ, DENY),
        acl("denied", DESCRIBE, ALLOW),
    )
    assert allowed(acls, DESCRIBE, "read") and allowed(acls, DESCRIBE, "written")
    assert not allowed(acls, WRITE, "read")
    assert allowed(acls, Operation.DESCRIBE_CONFIGS, "altered")
    assert not allowed(acls, DESCRIBE, "altered")
    # A DENY of READ does not deny DESCRIBE (StandardAuthorizerData.findResult).
    assert allowed(acls, DESCRIBE, "denied")
    assert not allowed(acls, READ, "denied")


def test_all_allows_and_denies_every_operation(authoriser: Authoriser) -> None:
    acls = authoriser.with_acls(
        acl("open", Operation.ALL), acl("closed", Operation.ALL, DENY), acl("closed", READ)
    )
    assert all(allowed(acls, operation, "open") for operation in (READ, WRITE, Operation.DELETE))
    assert not any(allowed(acls, operation, "closed") for operation in (READ, DESCRIBE))


def test_authorize_any_finds_some_resource_of_the_type(authoriser: Authoriser) -> None:
    acls = authoriser.acls
    assert not acls.authorize_any(ALICE, HOST, WRITE, TOPIC)
    authoriser.with_acls(acl("events", WRITE, pattern_type=PREFIXED))
    assert acls.authorize_any(ALICE, HOST, WRITE, TOPIC)  # KIP-679: idempotence by WRITE
    assert not acls.authorize_any(ALICE, HOST, WRITE, GROUP)
    assert not acls.authorize_any(ALICE, HOST, DESCRIBE, TOPIC)  # no implied operations
    authoriser.with_acls(acl("event", WRITE, DENY, pattern_type=PREFIXED))
    assert not acls.authorize_any(ALICE, HOST, WRITE, TOPIC)  # the only allow is covered
    authoriser.with_acls(acl("audit", WRITE))
    assert acls.authorize_any(ALICE, HOST, WRITE, TOPIC)
    authoriser.with_acls(acl("*", WRITE, DENY, principal=EVERYONE))
    assert not acls.authorize_any(ALICE, HOST, WRITE, TOPIC)
    with pytest.raises(ValueError, match="concrete"):
        acls.authorize_any(ALICE, HOST, Operation.ANY, TOPIC)


def test_a_change_is_seen_by_the_next_decision(authoriser: Authoriser) -> None:
    acls = authoriser.acls
    assert not allowed(acls, READ, "orders")
    authoriser.with_acls(acl("orders"))
    assert allowed(acls, READ, "orders")
    [result] = acls.delete([AclFilter(TOPIC, "orders", LITERAL)])
    assert result.deleted == [acl("orders")]
    assert not allowed(acls, READ, "orders")


def test_creation_is_refused_as_kafka_refuses_it(authoriser: Authoriser) -> None:
    refused = [
        acl("orders", resource_type=ResourceType.ANY),
        acl("orders", resource_type=ResourceType.UNKNOWN),
        acl("orders", pattern_type=PatternType.MATCH),
        acl("orders", pattern_type=PatternType.ANY),
        acl("orders", Operation.ANY),
        acl("orders", Operation.UNKNOWN),
        acl("orders", permission=Permission.ANY),
        acl(""),
        acl("my-cluster", Operation.ALTER, resource_type=CLUSTER),
        acl("orders", principal="alice"),
    ]
    good = acl(CLUSTER_NAME, Operation.ALTER, resource_type=CLUSTER)
    results = authoriser.acls.create([*refused, good])
    assert [code for code, _ in results] == [ErrorCode.invalid_request] * len(refused) + [
        ErrorCode.none
    ]
    assert all(message for _, message in results[:-1])
    assert authoriser.acls.describe(AclFilter()) == [good]
    assert binding_problem(acl("orders", principal="Group:x")) is None


def test_creating_twice_keeps_one_binding(authoriser: Authoriser) -> None:
    authoriser.with_acls(acl("orders"), acl("orders"))
    authoriser.with_acls(acl("orders"))
    assert authoriser.acls.describe(AclFilter()) == [acl("orders")]


def test_filters_with_an_unknown_part_are_refused() -> None:
    assert filter_problem(AclFilter()) is None
    for refused in (
        AclFilter(resource_type=ResourceType.UNKNOWN),
        AclFilter(pattern_type=PatternType.UNKNOWN),
        AclFilter(operation=Operation.UNKNOWN),
        AclFilter(permission=Permission.UNKNOWN),
    ):
        assert filter_problem(refused) is not None


def test_unknown_codes_read_as_unknown() -> None:
    assert from_code(ResourceType, 99) is ResourceType.UNKNOWN
    assert from_code(Operation, 14) is Operation.DESCRIBE_TOKENS
    assert from_code(Permission, -1) is Permission.UNKNOWN


def test_delete_lists_per_filter_what_it_matched(authoriser: Authoriser) -> None:
    authoriser.with_acls(acl("orders"), acl("orders", WRITE), acl("ord", pattern_type=PREFIXED))
    results = authoriser.acls.delete(
        [
            AclFilter(TOPIC, "orders", PatternType.MATCH, operation=READ),
            AclFilter(operation=READ),
            AclFilter(resource_type=ResourceType.UNKNOWN),
        ]
    )
    matched = [acl("ord", pattern_type=PREFIXED), acl("orders")]
    assert [sorted(result.deleted, key=str) for result in results[:2]] == [
        sorted(matched, key=str)
    ] * 2
    assert results[2].error_code == ErrorCode.invalid_request
    assert authoriser.acls.describe(AclFilter()) == [acl("orders", WRITE)]


def test_a_thousand_acls_and_a_fresh_decision_stays_fast(authoriser: Authoriser) -> None:
    bindings = [acl(f"topic-{index}", principal=f"User:u{index}") for index in range(1000)]
    bindings += [acl(f"p{index}-", pattern_type=PREFIXED) for index in range(1000)]
    authoriser.with_acls(*bindings)
    acls = authoriser.acls
    assert acls.authorize("User:u7", HOST, READ, TOPIC, "topic-7")
    assert allowed(acls, READ, "p999-events")
    assert not allowed(acls, READ, "q-events")
    # The index looks a name up by its length's prefixes, not by scanning every ACL.
    assert len(list(acls._snapshot.index.covering(TOPIC, "p999-events"))) == 1


# Properties, over a universe small enough that patterns overlap often.
NAMES = ("a", "ab", "abc", "b", "*")
PRINCIPALS = (ALICE, BOB, EVERYONE)
HOSTS = (HOST, OTHER_HOST, "*")
OPERATIONS = (READ, WRITE, DESCRIBE, Operation.ALTER, Operation.ALL)
bindings_strategy = st.builds(
    AclBinding,
    st.sampled_from((TOPIC, GROUP)),
    st.sampled_from(NAMES),
    st.sampled_from((LITERAL, PREFIXED)),
    st.sampled_from(PRINCIPALS),
    st.sampled_from(HOSTS),
    st.sampled_from(OPERATIONS),
    st.sampled_from((ALLOW, DENY)),
)
actions = st.tuples(
    st.sampled_from((ALICE, BOB)),
    st.sampled_from((HOST, OTHER_HOST)),
    st.sampled_from((READ, WRITE, DESCRIBE, Operation.ALTER)),
    st.sampled_from((TOPIC, GROUP)),
    st.sampled_from(("a", "ab", "abc", "abd", "b", "c", "*")),
)


def reference_decision(
    bindings: Sequence[AclBinding],
    action: tuple[str, str, Operation, ResourceType, str],
    allow_if_no_acl: bool,
) -> bool:
    """The rules as Kafka's StandardAuthorizer documents them, checked ACL by ACL."""
    principal, host, operation, resource_type, name = action
    covering = [
        binding
        for binding in bindings
        if binding.resource_type == resource_type
        and (
            (binding.pattern_type == LITERAL and binding.resource_name in (name, "*"))
            or (binding.pattern_type == PREFIXED and name.startswith(binding.resource_name))
        )
    ]

    def applies(binding: AclBinding) -> bool:
        if binding.principal not in (principal, EVERYONE) or binding.host not in (host, "*"):
            return False
        if binding.operation in (Operation.ALL, operation):
            return True
        implied = {DESCRIBE: {READ, WRITE, Operation.DELETE, Operation.ALTER}}
        return binding.permission == ALLOW and binding.operation in implied.get(operation, ())

    if any(applies(binding) and binding.permission == DENY for binding in covering):
        return False
    if any(applies(binding) for binding in covering):
        return True
    return allow_if_no_acl and not covering


@EXAMPLES
@given(
    bindings=st.lists(bindings_strategy, max_size=12),
    action=actions,
    allow_if_no_acl=st.booleans(),
)
def test_the_index_decides_as_the_rules_read(
    tmp_path_factory: pytest.TempPathFactory,
    bindings: list[AclBinding],
    action: tuple[str, str, Operation, ResourceType, str],
    allow_if_no_acl: bool,
) -> None:
    directory = tmp_path_factory.mktemp("acls")
    opened = Authoriser(directory, allow_everyone_if_no_acl_found=str(allow_if_no_acl).lower())
    try:
        opened.with_acls(*bindings)
        first = opened.acls.authorize(*action)
        assert first == reference_decision(bindings, action, allow_if_no_acl)
        assert opened.acls.authorize(*action) == first  # remembered, the same
    finally:
        opened.close()


@EXAMPLES
@given(bindings=st.lists(bindings_strategy, max_size=12), action=actions)
def test_some_resource_allowed_means_authorize_any_allows(
    tmp_path_factory: pytest.TempPathFactory,
    bindings: list[AclBinding],
    action: tuple[str, str, Operation, ResourceType, str],
) -> None:
    principal, host, _, resource_type, _ = action
    opened = Authoriser(tmp_path_factory.mktemp("acls"))
    try:
        acls = opened.with_acls(*bindings)
        for operation in (READ, WRITE):  # operations no other implies
            some = any(
                acls.authorize(principal, host, operation, resource_type, name)
                for name in ("a", "ab", "abc", "abd", "b", "c", "zzz")
            )
            if some:
                assert acls.authorize_any(principal, host, operation, resource_type)
    finally:
        opened.close()


@EXAMPLES
@given(binding=bindings_strategy, name=st.sampled_from(("a", "ab", "abc", "abd", "*", "c")))
def test_filters_match_as_kafkas_do(binding: AclBinding, name: str) -> None:
    exact = AclFilter(
        binding.resource_type,
        binding.resource_name,
        binding.pattern_type,
        binding.principal,
        binding.host,
        binding.operation,
        binding.permission,
    )
    assert exact.matches(binding) and AclFilter().matches(binding)
    by_name = AclFilter(binding.resource_type, name, PatternType.ANY)
    assert by_name.matches(binding) == (binding.resource_name == name)
    matching = AclFilter(ResourceType.ANY, name, PatternType.MATCH)
    assert matching.matches(binding) == binding.pattern_matches(name)
    assert not AclFilter(principal=EVERYONE).matches(binding) or binding.principal == EVERYONE

"""A binding from its seven wire codes (AclBinding.from_codes), and to the ACL store's
record and back (security/acls/records.py)."""

from __future__ import annotations

from kshim.broker.security.acls.records import from_record, to_record
from kshim.protocol.acls import AclBinding, Operation, PatternType, Permission, ResourceType
from kshim.storage.meta.acl_store import AclRecord


def test_codes_kafka_lacks_read_as_unknown() -> None:
    binding = AclBinding.from_codes(
        resource_type=99,
        resource_name="orders",
        pattern_type=3,
        principal="User:alice",
        host="*",
        operation=-1,
        permission=3,
    )
    assert binding == AclBinding(
        ResourceType.UNKNOWN,
        "orders",
        PatternType.LITERAL,
        "User:alice",
        "*",
        Operation.UNKNOWN,
        Permission.ALLOW,
    )


def test_a_binding_is_stored_as_its_codes_and_read_back() -> None:
    binding = AclBinding(
        ResourceType.GROUP,
        "app-",
        PatternType.PREFIXED,
        "User:bob",
        "10.0.0.1",
        Operation.READ,
        Permission.DENY,
    )
    record = to_record(binding)
    assert record == AclRecord(3, "app-", 4, "User:bob", "10.0.0.1", 3, 2)
    assert from_record(record) == binding

"""An ACL binding as the ACL store keeps it, and back: the store holds Kafka's codes and
strings (kshim/storage/meta/acl_store.py), the broker the vocabulary's types
(kshim/protocol/acls.py), as Kafka's AclControlManager turns an AclBinding into its
metadata log's AclRecord."""

from __future__ import annotations

from kshim.protocol.acls import AclBinding
from kshim.storage.meta.acl_store import AclRecord


def to_record(binding: AclBinding) -> AclRecord:
    return AclRecord(
        int(binding.resource_type),
        binding.resource_name,
        int(binding.pattern_type),
        binding.principal,
        binding.host,
        int(binding.operation),
        int(binding.permission),
    )


def from_record(record: AclRecord) -> AclBinding:
    """The binding ``record`` stores, a code Kafka does not know read as UNKNOWN."""
    return AclBinding.from_codes(
        resource_type=record.resource_type,
        resource_name=record.resource_name,
        pattern_type=record.pattern_type,
        principal=record.principal,
        host=record.host,
        operation=record.operation,
        permission=record.permission,
    )

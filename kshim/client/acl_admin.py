"""``kshim acls``' wire queries: DescribeAcls, CreateAcls and DeleteAcls.

Requests go through kshim's own blocking client (``kshim.client.wire``), so the command
needs no client library and works against any Kafka broker with an authoriser. Each is sent
at v3 (KIP-373's USER resource type; flexible since v2, KIP-482), which kshim and Apache
Kafka 2.6 to 4.x serve, to the bootstrap broker: Kafka forwards ACL changes to its
controller itself (KIP-590), and kshim is one broker. Every socket operation has a
timeout; a connection is used by one thread.
"""

from __future__ import annotations

from collections.abc import Sequence

from kio.schema.create_acls.v3.response import CreateAclsResponse
from kio.schema.delete_acls.v3.response import DeleteAclsMatchingAcl, DeleteAclsResponse
from kio.schema.describe_acls.v3.response import (
    AclDescription,
    DescribeAclsResource,
    DescribeAclsResponse,
)

from kshim.client.admin_connection import BootstrapAdmin
from kshim.client.request_versions import CREATE_ACLS, DELETE_ACLS, DESCRIBE_ACLS
from kshim.protocol.acls import AclBinding, AclFilter


class AclAdminError(Exception):
    """The broker answered with an error code, closed the connection, or broke the protocol."""


class AclAdmin(BootstrapAdmin):
    """The ACL requests, over one connection; each raises AclAdminError on an error answer
    (SECURITY_DISABLED from a broker without an authoriser, CLUSTER_AUTHORIZATION_FAILED,
    INVALID_REQUEST)."""

    client_id = "kshim-acls"
    error = AclAdminError

    def describe(self, acl_filter: AclFilter) -> list[AclBinding]:
        """The bindings the broker lists for ``acl_filter``, in the broker's order."""
        response = self._call(DescribeAclsResponse, DESCRIBE_ACLS, _filter_fields(acl_filter))
        self._check(response.error_code, "cannot list ACLs", response.error_message)
        return [_binding(resource, acl) for resource in response.resources for acl in resource.acls]

    def create(self, bindings: Sequence[AclBinding]) -> None:
        """Creates all ``bindings`` (one already there is no error); raises AclAdminError
        naming the first one refused."""
        creations = [
            {
                "resource_type": int(binding.resource_type),
                "resource_name": binding.resource_name,
                "resource_pattern_type": int(binding.pattern_type),
                "principal": binding.principal,
                "host": binding.host,
                "operation": int(binding.operation),
                "permission_type": int(binding.permission),
            }
            for binding in bindings
        ]
        response = self._call(CreateAclsResponse, CREATE_ACLS, {"creations": creations})
        for binding, result in zip(bindings, response.results, strict=True):
            self._check(result.error_code, f"cannot add {describe(binding)}", result.error_message)

    def delete(self, filters: Sequence[AclFilter]) -> list[AclBinding]:
        """Deletes every binding one of ``filters`` matches; returns those deleted, each
        once, in the broker's order."""
        request = {"filters": [_filter_fields(acl_filter) for acl_filter in filters]}
        response = self._call(DeleteAclsResponse, DELETE_ACLS, request)
        deleted: dict[AclBinding, None] = {}
        for result in response.filter_results:
            self._check(result.error_code, "cannot remove ACLs", result.error_message)
            for matched in result.matching_acls:
                self._check(matched.error_code, "cannot remove an ACL", matched.error_message)
                # A matching ACL carries its pattern and its entry in one.
                deleted[_binding(matched, matched)] = None
        return list(deleted)


# ``kshim acls``' admin on the bootstrap broker (BootstrapAdmin.connected).
acl_admin = AclAdmin.connected


def _binding(
    pattern: DescribeAclsResource | DeleteAclsMatchingAcl,
    entry: AclDescription | DeleteAclsMatchingAcl,
) -> AclBinding:
    """A binding from its resource pattern and its access control entry as the answers
    carry them (Kafka's AclBinding is the two), a code Kafka does not know read as
    UNKNOWN."""
    return AclBinding.from_codes(
        resource_type=pattern.resource_type,
        resource_name=pattern.resource_name,
        pattern_type=pattern.pattern_type,
        principal=entry.principal,
        host=entry.host,
        operation=entry.operation,
        permission=entry.permission_type,
    )


def _filter_fields(acl_filter: AclFilter) -> dict[str, object]:
    """A filter in DescribeAcls' and DeleteAcls' field names."""
    return {
        "resource_type_filter": int(acl_filter.resource_type),
        "resource_name_filter": acl_filter.resource_name,
        "pattern_type_filter": int(acl_filter.pattern_type),
        "principal_filter": acl_filter.principal,
        "host_filter": acl_filter.host,
        "operation": int(acl_filter.operation),
        "permission_type": int(acl_filter.permission),
    }


def describe(binding: AclBinding) -> str:
    """One binding in a line: ``ALLOW User:alice READ on TOPIC orders (LITERAL) from *``."""
    return (
        f"{binding.permission.name} {binding.principal} {binding.operation.name} on "
        f"{binding.resource_type.name} {binding.resource_name} "
        f"({binding.pattern_type.name}) from {binding.host}"
    )

"""``kshim acls``' wire queries: DescribeAcls, CreateAcls and DeleteAcls.

Requests go through kshim's own blocking client (``kshim.client.wire``), so the command
needs no client library and works against any Kafka broker with an authoriser. Each is sent
at v3 (KIP-373's USER resource type; flexible since v2, KIP-482), which kshim and Apache
Kafka 2.6 to 4.x serve, to the bootstrap broker: Kafka forwards ACL changes to its
controller itself (KIP-590), and kshim is one broker. Every socket operation has a
timeout; a connection is used by one thread.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import TypeVar

from kio.schema.create_acls.v3.response import CreateAclsResponse
from kio.schema.delete_acls.v3.response import DeleteAclsResponse
from kio.schema.describe_acls.v3.response import DescribeAclsResponse

from kshim.broker.security.acls.model import (
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    from_code,
)
from kshim.client.admin_connection import admin_connection
from kshim.client.security import ClientSecurity
from kshim.client.wire import WireConnection
from kshim.protocol.errors import ErrorCode

_Response = TypeVar("_Response")

CLIENT_ID = "kshim-acls"
DESCRIBE_ACLS = (29, 3)
CREATE_ACLS = (30, 3)
DELETE_ACLS = (31, 3)
READ_TIMEOUT_S = 30.0


class AclAdminError(Exception):
    """The broker answered with an error code, closed the connection, or broke the protocol."""


@contextlib.contextmanager
def acl_admin(
    bootstrap: str,
    timeout_s: float = READ_TIMEOUT_S,
    *,
    security: ClientSecurity | None = None,
) -> Iterator[AclAdmin]:
    """An AclAdmin on a connection to the first broker of ``bootstrap``, secured as
    ``security`` says (None: PLAINTEXT), closed after.

    Raises ValueError for a bootstrap that is not host:port, OSError when the broker cannot
    be reached or does not answer in time, AclAdminError on an error answer or when the
    broker closes the connection or answers something malformed.
    """
    with admin_connection(bootstrap, timeout_s, CLIENT_ID, AclAdminError, security) as connection:
        yield AclAdmin(connection)


class AclAdmin:
    """The ACL requests, over one connection; each raises AclAdminError on an error answer
    (SECURITY_DISABLED from a broker without an authoriser, CLUSTER_AUTHORIZATION_FAILED,
    INVALID_REQUEST)."""

    def __init__(self, connection: WireConnection) -> None:
        self._connection = connection

    def describe(self, acl_filter: AclFilter) -> list[AclBinding]:
        """The bindings the broker lists for ``acl_filter``, in the broker's order."""
        response = self._call(DescribeAclsResponse, DESCRIBE_ACLS, _filter_fields(acl_filter))
        _check(response.error_code, "cannot list ACLs", response.error_message)
        return [
            AclBinding(
                from_code(ResourceType, int(resource.resource_type)),
                str(resource.resource_name),
                from_code(PatternType, int(resource.pattern_type)),
                str(acl.principal),
                str(acl.host),
                from_code(Operation, int(acl.operation)),
                from_code(Permission, int(acl.permission_type)),
            )
            for resource in response.resources
            for acl in resource.acls
        ]

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
            _check(result.error_code, f"cannot add {describe(binding)}", result.error_message)

    def delete(self, filters: Sequence[AclFilter]) -> list[AclBinding]:
        """Deletes every binding one of ``filters`` matches; returns those deleted, each
        once, in the broker's order."""
        request = {"filters": [_filter_fields(acl_filter) for acl_filter in filters]}
        response = self._call(DeleteAclsResponse, DELETE_ACLS, request)
        deleted: dict[AclBinding, None] = {}
        for result in response.filter_results:
            _check(result.error_code, "cannot remove ACLs", result.error_message)
            for matched in result.matching_acls:
                _check(matched.error_code, "cannot remove an ACL", matched.error_message)
                binding = AclBinding(
                    from_code(ResourceType, int(matched.resource_type)),
                    str(matched.resource_name),
                    from_code(PatternType, int(matched.pattern_type)),
                    str(matched.principal),
                    str(matched.host),
                    from_code(Operation, int(matched.operation)),
                    from_code(Permission, int(matched.permission_type)),
                )
                deleted[binding] = None
        return list(deleted)

    def _call(
        self, response_type: type[_Response], api: tuple[int, int], fields: Mapping[str, object]
    ) -> _Response:
        api_key, version = api
        return self._connection.call_for(response_type, api_key, version, fields)


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


def _check(error_code: int, what: str, message: str | None = None) -> None:
    """Raises AclAdminError unless ``error_code`` is NONE: ``what``, Kafka's name for the
    error, and the broker's own message when it sent one."""
    if error_code == 0:
        return
    try:
        name = ErrorCode(error_code).name.upper()
    except ValueError:
        name = f"error code {error_code}"
    raise AclAdminError(f"{what}: {name}" + (f" ({message})" if message else ""))

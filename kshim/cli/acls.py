"""``kshim acls``: add, list and remove the ACLs of a running broker (kshim, or any Kafka
broker with an authoriser), as Kafka's kafka-acls.sh does with ``--add``, ``--list`` and
``--remove``, taking its options by the same names.

Resources: ``--topic``, ``--group``, ``--transactional-id``, ``--delegation-token``,
``--user-principal`` (each repeatable) and ``--cluster``, under ``--resource-pattern-type``
(literal by default; prefixed; and, to list or remove, any or match: KIP-290). Entries:
``--allow-principal`` and ``--deny-principal`` (``User:alice``, ``User:*`` for everyone),
from ``--allow-host`` and ``--deny-host`` (default ``*``), for each ``--operation``
(default All), or the ``--producer`` and ``--consumer`` sets of operations
(``--idempotent`` adds IdempotentWrite on the cluster), as kafka-acls.sh makes them.

``list`` prints an aligned table, one ACL a row (``--principal`` keeps those of the
principals named); add and remove print a line per ACL; ``--json`` prints one JSON object
per ACL instead. kafka-acls.sh asks before it removes; this command does not ask, and
instead refuses to remove every ACL of a resource (no principal named) without ``--force``.
``--command-config`` takes the client properties file, as ``kshim topics`` does.
"""

from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Callable, Iterator, Sequence

from kshim.cli.admin_options import Commands, add_admin_command, run_subcommand
from kshim.cli.argument_types import add_list_option
from kshim.cli.errors import OneLineArgumentParser, UsageError
from kshim.cli.text_table import fixed_width_table
from kshim.client.acl_admin import AclAdmin, AclAdminError, acl_admin, describe
from kshim.protocol.acls import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    WILDCARD,
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    is_principal,
)

ACLS_PROGRAM = "kshim acls"
# The option naming each resource type, and its type (kafka-acls.sh's names).
RESOURCE_OPTIONS = {
    "topic": ResourceType.TOPIC,
    "group": ResourceType.GROUP,
    "transactional_id": ResourceType.TRANSACTIONAL_ID,
    "delegation_token": ResourceType.DELEGATION_TOKEN,
    "user_principal": ResourceType.USER,
}
RESOURCE_NAMES = (
    "--topic, --group, --transactional-id, --delegation-token, --user-principal or --cluster"
)
# kafka-acls.sh's --producer and --consumer: the operations each makes, by resource type.
PRODUCER_OPERATIONS = {
    ResourceType.TOPIC: (Operation.WRITE, Operation.DESCRIBE, Operation.CREATE),
    ResourceType.TRANSACTIONAL_ID: (Operation.WRITE, Operation.DESCRIBE),
}
CONSUMER_OPERATIONS = {
    ResourceType.TOPIC: (Operation.READ, Operation.DESCRIBE),
    ResourceType.GROUP: (Operation.READ,),
}
# A resource pattern: type, name, pattern type (a filter's when listing or removing).
Resource = tuple[ResourceType, str, PatternType]
# An entry: principal, host, operation, permission.
Entry = tuple[str, str, Operation, Permission]
# A subcommand's requests and report, once its options are checked.
Action = Callable[[AclAdmin], Iterator[str]]


def add_acls_parser(commands: Commands) -> None:
    """Adds ``acls`` and its subcommands to the ``kshim`` parser's ``commands``."""
    add = add_admin_command(
        commands, "acls", "ACLs: add, list, remove", ACLS_PROGRAM, ("add", "list", "remove")
    )
    adding = add("add", "add ACLs")
    _add_resources(adding, "literal (default) or prefixed")
    _add_entries(adding)
    listing = add("list", "ACLs of the resources named (default: every ACL)")
    _add_resources(listing, "literal (default), prefixed, any or match")
    add_list_option(listing, "--principal", "PRINCIPAL", "only these principals' ACLs")
    removing = add("remove", "remove ACLs")
    _add_resources(removing, "literal (default), prefixed, any or match")
    _add_entries(removing)
    removing.add_argument(
        "--force", action="store_true", help="remove every ACL of the resources named"
    )


def _add_resources(parser: OneLineArgumentParser, pattern_help: str) -> None:
    for option in RESOURCE_OPTIONS:
        add_list_option(parser, "--" + option.replace("_", "-"), "NAME")
    parser.add_argument("--cluster", action="store_true", help="the cluster resource")
    parser.add_argument(
        "--resource-pattern-type",
        type=pattern_type_argument,
        default=PatternType.LITERAL,
        metavar="TYPE",
        help=pattern_help,
    )


def _add_entries(parser: OneLineArgumentParser) -> None:
    principal_help = "User:name, or User:* for every principal"
    for option in ("--allow-principal", "--deny-principal"):
        add_list_option(parser, option, "PRINCIPAL", principal_help, principal_argument)
    for option in ("--allow-host", "--deny-host"):
        add_list_option(parser, option, "HOST", "an IP address (default: * for any host)")
    parser.add_argument(
        "--operation",
        action="extend",
        nargs="+",
        type=operation_argument,
        metavar="OPERATION",
        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
        "AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens or All (default)",
    )
    parser.add_argument("--producer", action="store_true", help="Write, Describe, Create")
    parser.add_argument("--consumer", action="store_true", help="Read, Describe; Read on groups")
    parser.add_argument(
        "--idempotent", action="store_true", help="with --producer: IdempotentWrite on cluster"
    )


def pattern_type_argument(text: str) -> PatternType:
    """argparse type of --resource-pattern-type: literal, prefixed, any or match."""
    for pattern_type in PatternType:
        if pattern_type != PatternType.UNKNOWN and text.upper() == pattern_type.name:
            return pattern_type
    raise argparse.ArgumentTypeError(f"{text!r} is not literal, prefixed, any or match")


def operation_argument(text: str) -> Operation:
    """argparse type of --operation: Kafka's name in any case, with or without
    underscores (ClusterAction, CLUSTER_ACTION, cluster-action)."""
    wanted = text.replace("_", "").replace("-", "").upper()
    for operation in Operation:
        if operation > Operation.ANY and operation.name.replace("_", "") == wanted:
            return operation
    raise argparse.ArgumentTypeError(f"{text!r} is not an ACL operation")


def principal_argument(text: str) -> str:
    """argparse type of a principal: ``principalType:name`` (``User:alice``, ``User:*``)."""
    if not is_principal(text.strip()):
        raise argparse.ArgumentTypeError(f"{text!r} is not principalType:name (User:alice)")
    return text.strip()


def run_acls(arguments: argparse.Namespace) -> None:
    """Runs one ``kshim acls`` subcommand and prints its result.

    Raises UsageError for options Kafka's tool refuses (an add without a principal or a
    resource, an operation the resource type does not support, a removal of every ACL of a
    resource without --force) or a --command-config asking for what is not supported;
    CommandFailed when the broker cannot be reached or answers with an error.
    """
    action = PLANS[arguments.acls_command](arguments)
    run_subcommand(
        arguments.bootstrap,
        acl_admin,
        lambda admin, _: action(admin),
        arguments,
        (AclAdminError,),
    )


def resources(arguments: argparse.Namespace) -> list[Resource]:
    """The resource patterns the options name, in the order of RESOURCE_OPTIONS, each of
    --resource-pattern-type; --cluster (or --idempotent) names ``kafka-cluster``, which
    cannot be a prefix. Raises UsageError."""
    pattern_type = arguments.resource_pattern_type
    named = [
        (resource_type, name.strip(), pattern_type)
        for option, resource_type in RESOURCE_OPTIONS.items()
        for name in getattr(arguments, option)
    ]
    if arguments.cluster or getattr(arguments, "idempotent", False):
        if pattern_type == PatternType.PREFIXED:
            raise UsageError("--cluster takes no --resource-pattern-type prefixed")
        named.append((ResourceType.CLUSTER, CLUSTER_NAME, pattern_type))
    return list(dict.fromkeys(named))


def entries(arguments: argparse.Namespace, operations: Sequence[Operation]) -> list[Entry]:
    """kafka-acls.sh's entries: each allowed principal from each allowed host (default
    ``*``) for each operation, then the same for the denied ones."""
    made: list[Entry] = []
    for permission, principals, hosts in (
        (Permission.ALLOW, arguments.allow_principal, arguments.allow_host),
        (Permission.DENY, arguments.deny_principal, arguments.deny_host),
    ):
        made += [
            (principal, host.strip(), operation, permission)
            for principal in dict.fromkeys(principals)
            for host in dict.fromkeys(hosts or [WILDCARD])
            for operation in dict.fromkeys(operations)
        ]
    return made


def resource_entries(arguments: argparse.Namespace) -> list[tuple[Resource, list[Entry]]]:
    """Each resource named with the entries for it: those of --operation (default All),
    or --producer's and --consumer's for the resource types they cover; raises
    UsageError for an operation the resource type does not support (as Kafka's tool)."""
    named = resources(arguments)
    if not named:
        raise UsageError(f"name at least one resource: {RESOURCE_NAMES}")
    paired = []
    for resource in named:
        operations = _operations(arguments, resource[0])
        unsupported = set(operations) - SUPPORTED_OPERATIONS[resource[0]] - {Operation.ALL}
        if unsupported:
            supported = sorted(SUPPORTED_OPERATIONS[resource[0]] | {Operation.ALL})
            names = ", ".join(operation.name for operation in supported)
            raise UsageError(f"ResourceType {resource[0].name} only supports operations {names}")
        if operations:
            paired.append((resource, entries(arguments, operations)))
    return paired


def _operations(arguments: argparse.Namespace, resource_type: ResourceType) -> list[Operation]:
    if not (arguments.producer or arguments.consumer):
        return arguments.operation or [Operation.ALL]
    operations = list(PRODUCER_OPERATIONS.get(resource_type, ())) if arguments.producer else []
    if arguments.consumer:
        operations += CONSUMER_OPERATIONS.get(resource_type, ())
    if resource_type == ResourceType.CLUSTER and arguments.idempotent:
        operations.append(Operation.IDEMPOTENT_WRITE)
    return list(dict.fromkeys(operations))


def plan_add(arguments: argparse.Namespace) -> Action:
    """``add``'s request, checked before any connection; raises UsageError."""
    if arguments.resource_pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        name = arguments.resource_pattern_type.name
        raise UsageError(f"a --resource-pattern-type of {name} is not valid when adding ACLs")
    if not (arguments.allow_principal or arguments.deny_principal):
        raise UsageError("add needs --allow-principal or --deny-principal")
    bindings = [
        AclBinding(resource_type, name, pattern_type, *entry)
        for (resource_type, name, pattern_type), made in resource_entries(arguments)
        for entry in made
    ]
    return functools.partial(_create, bindings, arguments.json)


def plan_list(arguments: argparse.Namespace) -> Action:
    filters = [AclFilter(*resource) for resource in resources(arguments)] or [AclFilter()]
    return functools.partial(_describe, filters, set(arguments.principal), arguments.json)


def plan_remove(arguments: argparse.Namespace) -> Action:
    """``remove``'s request: the entries named for each resource, or with --force every
    ACL of each resource; raises UsageError."""
    if arguments.allow_principal or arguments.deny_principal:
        filters = [
            AclFilter(resource_type, name, pattern_type, *entry)
            for (resource_type, name, pattern_type), made in resource_entries(arguments)
            for entry in made
        ]
    elif not arguments.force:
        raise UsageError(
            "remove without --allow-principal or --deny-principal removes every ACL of the "
            "resources named; add --force to do that"
        )
    else:
        filters = [AclFilter(*resource) for resource in resources(arguments)]
        if not filters:
            raise UsageError(f"remove needs a resource: {RESOURCE_NAMES}")
    return functools.partial(_delete, filters, arguments.json)


def _create(bindings: list[AclBinding], as_json: bool, admin: AclAdmin) -> Iterator[str]:
    admin.create(bindings)
    yield from _report(bindings, as_json, "added")


def _describe(
    filters: list[AclFilter], principals: set[str], as_json: bool, admin: AclAdmin
) -> Iterator[str]:
    found: dict[AclBinding, None] = {}
    for acl_filter in filters:
        found.update(dict.fromkeys(admin.describe(acl_filter)))
    listed = [binding for binding in found if not principals or binding.principal in principals]
    if as_json:
        yield from (json.dumps(binding_json(binding)) for binding in listed)
    else:
        yield acl_table(listed)


def _delete(filters: list[AclFilter], as_json: bool, admin: AclAdmin) -> Iterator[str]:
    deleted = admin.delete(filters)
    if not (deleted or as_json):
        yield "no ACL matched: nothing removed"
    yield from _report(deleted, as_json, "removed")


def _report(bindings: Sequence[AclBinding], as_json: bool, done: str) -> Iterator[str]:
    if as_json:
        yield from (json.dumps(binding_json(binding)) for binding in bindings)
    else:
        yield from (f"{done} {describe(binding)}" for binding in bindings)


def binding_json(binding: AclBinding) -> dict[str, str]:
    """A binding as ``--json`` and the table show it, in Kafka's names (TOPIC, LITERAL)."""
    return {
        "resource_type": binding.resource_type.name,
        "resource_name": binding.resource_name,
        "pattern_type": binding.pattern_type.name,
        "principal": binding.principal,
        "host": binding.host,
        "operation": binding.operation.name,
        "permission": binding.permission.name,
    }


def acl_table(bindings: Sequence[AclBinding]) -> str:
    header = (
        "RESOURCE-TYPE",
        "RESOURCE",
        "PATTERN",
        "PRINCIPAL",
        "HOST",
        "OPERATION",
        "PERMISSION",
    )
    rows = [tuple(binding_json(binding).values()) for binding in bindings]
    return fixed_width_table(header, rows, left_aligned=set(range(len(header))))


PLANS: dict[str, Callable[[argparse.Namespace], Action]] = {
    "add": plan_add,
    "list": plan_list,
    "remove": plan_remove,
}

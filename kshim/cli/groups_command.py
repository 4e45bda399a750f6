"""``kshim groups reset-offsets``, ``delete`` and ``describe``: change or describe the consumer
groups of a running broker (kshim or any Kafka broker), as Kafka's kafka-consumer-groups.sh
does with ``--reset-offsets``, ``--delete`` and ``--describe --members`` / ``--state``.

``kshim groups`` without a subcommand still prints the status table (kshim/cli/main.py).
A reset prints its plan as an aligned table and changes nothing unless ``--execute`` is
given, Kafka's dry-run default; ``--json`` prints one JSON object per line instead.
``--command-config`` takes the same Kafka client properties file (security.protocol, TLS
and SASL settings) as ``kshim topics``; given to ``kshim groups`` itself, the status table
uses it too.
"""

from __future__ import annotations

import argparse
import datetime
import json
from collections.abc import Callable, Iterator
from dataclasses import asdict

from kshim.cli.admin_options import run_subcommand, subcommands
from kshim.cli.argument_types import partition_argument
from kshim.cli.errors import GROUPS_PROGRAM, OneLineArgumentParser
from kshim.cli.text_table import fixed_width_table
from kshim.client.group_admin import GroupAdmin, GroupAdminError, GroupMember, group_admin
from kshim.client.offset_reset import (
    PlannedOffset,
    ResetRefused,
    ResetTarget,
    TargetKind,
    execute,
    plan_reset,
)

NO_OFFSET = "-"


def add_group_admin_parsers(groups: OneLineArgumentParser) -> None:
    """Adds the optional ``reset-offsets`` and ``delete`` subcommands to the ``kshim groups``
    parser."""
    # No --bootstrap default on the subcommands: one given before the subcommand, or the
    # groups parser's default, is kept unless the subcommand names one itself.
    add = subcommands(
        groups,
        "groups_command",
        SUBCOMMANDS,
        GROUPS_PROGRAM,
        required=False,
        bootstrap_default=argparse.SUPPRESS,
    )
    _add_reset(add("reset-offsets", "set a group's committed offsets (dry run unless --execute)"))
    add("delete", "delete groups and their committed offsets").add_argument(
        "--group", dest="groups", action="append", required=True, metavar="GROUP"
    )
    _add_describe(add("describe", "groups' members and assignments, or their state"))


def _add_describe(describe: OneLineArgumentParser) -> None:
    describe.add_argument(
        "--group",
        dest="groups",
        action="append",
        metavar="GROUP",
        help="only this group, repeatable (default: every group)",
    )
    shown = describe.add_mutually_exclusive_group(required=True)
    shown.add_argument(
        "--members",
        action="store_true",
        help="each member: its ids, host, client id and assigned partitions",
    )
    shown.add_argument("--state", action="store_true", help="each group's state and size")


def _add_reset(reset: OneLineArgumentParser) -> None:
    reset.add_argument("--group", required=True)
    reset.add_argument("--topic", required=True)
    reset.add_argument(
        "--partition",
        dest="partitions",
        action="append",
        type=partition_argument,
        metavar="P",
        help="only this partition, repeatable (default: every partition)",
    )
    targets = reset.add_mutually_exclusive_group(required=True)
    targets.add_argument("--to-earliest", action="store_true", help="the log start")
    targets.add_argument("--to-latest", action="store_true", help="the log end")
    targets.add_argument(
        "--to-datetime",
        type=datetime_argument,
        metavar="ISO8601",
        help="the first record at or after it (local time unless it has a zone or Z)",
    )
    targets.add_argument(
        "--shift-by", type=int, metavar="N", help="the committed offset plus N (may be negative)"
    )
    reset.add_argument(
        "--execute", action="store_true", help="commit the new offsets (default: only show them)"
    )


def datetime_argument(text: str) -> int:
    """argparse type of --to-datetime: epoch milliseconds of an ISO 8601 date and time, such
    as 2024-05-01T10:00:00.000Z. Without a zone it is local time, as Kafka's tool reads it
    (Utils.getDateTime)."""
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO 8601 date and time") from None
    return round(moment.timestamp() * 1000)


def run_group_admin(arguments: argparse.Namespace) -> None:
    """Runs one ``kshim groups`` subcommand and prints its result.

    Raises UsageError for a --command-config that cannot be used; CommandFailed when the
    broker cannot be reached, refuses the authentication, answers with an error, or the
    reset is refused (an active group), and after printing the groups it did delete when
    it could not delete every one.
    """
    subcommand = SUBCOMMANDS[arguments.groups_command]
    refusals = (GroupAdminError, ResetRefused)
    run_subcommand(arguments.bootstrap, group_admin, subcommand, arguments, refusals)


def _reset(admin: GroupAdmin, arguments: argparse.Namespace) -> Iterator[str]:
    plan = plan_reset(
        admin, arguments.group, arguments.topic, arguments.partitions, reset_target(arguments)
    )
    if arguments.execute:
        execute(admin, plan)
    if arguments.json:
        for row in plan:
            yield json.dumps({**row.to_json(), "executed": arguments.execute})
        return
    yield plan_table(plan)
    if arguments.execute:
        yield f"committed the new offsets of group {arguments.group}"
    else:
        yield "dry run: nothing changed; add --execute to commit these offsets"


def reset_target(arguments: argparse.Namespace) -> ResetTarget:
    if arguments.to_earliest:
        return ResetTarget(TargetKind.EARLIEST)
    if arguments.to_latest:
        return ResetTarget(TargetKind.LATEST)
    if arguments.to_datetime is not None:
        return ResetTarget(TargetKind.DATETIME, arguments.to_datetime)
    return ResetTarget(TargetKind.SHIFT, arguments.shift_by)


def _delete(admin: GroupAdmin, arguments: argparse.Namespace) -> Iterator[str]:
    """Deletes every group named; the ones deleted are printed before the error line that
    says which were not and why, as Kafka deletes each group on its own."""
    results = admin.delete_groups(arguments.groups)
    for group in [group for group, error in results.items() if error is None]:
        if arguments.json:
            yield json.dumps({"group": group, "deleted": True})
        else:
            yield f"deleted group {group}"
    failures = [f"{group}: {error}" for group, error in results.items() if error is not None]
    if failures:
        raise GroupAdminError("cannot delete group " + "; ".join(failures))


def _describe(admin: GroupAdmin, arguments: argparse.Namespace) -> Iterator[str]:
    """As kafka-consumer-groups.sh --describe --members --verbose (or --state) prints it;
    the offsets and lag of each partition are ``kshim groups`` itself."""
    named = list(dict.fromkeys(arguments.groups or ()))
    described = admin.members(named or admin.list_groups())
    missing = [group for group in named if group not in described]
    if missing:
        raise GroupAdminError(f"consumer group {', '.join(missing)} does not exist")
    if arguments.state:
        yield from _state_lines(admin, list(described), arguments.json)
    elif arguments.json:
        for group_members in described.values():
            yield from (json.dumps(member_json(member)) for member in group_members)
    else:
        yield from _member_lines(described)


def _state_lines(admin: GroupAdmin, groups: list[str], as_json: bool) -> Iterator[str]:
    descriptions = [admin.describe(group) for group in groups]
    if as_json:
        yield from (json.dumps(asdict(description)) for description in descriptions)
        return
    rows = [(item.group, item.state, str(item.members)) for item in descriptions]
    yield fixed_width_table(("GROUP", "STATE", "MEMBERS"), rows, left_aligned={0, 1})


def _member_lines(described: dict[str, list[GroupMember]]) -> Iterator[str]:
    """The members table, after one line per group that has none (Kafka's tool says so
    rather than printing an empty table)."""
    for group, group_members in described.items():
        if not group_members:
            yield f"consumer group {group} has no active members"
    rows = [member_cells(member) for members in described.values() for member in members]
    if rows:
        yield fixed_width_table(MEMBER_COLUMNS, rows, left_aligned=set(range(7)) - {5})


MEMBER_COLUMNS = (
    "GROUP",
    "CONSUMER-ID",
    "GROUP-INSTANCE-ID",
    "HOST",
    "CLIENT-ID",
    "#PARTITIONS",
    "ASSIGNMENT",
)


def member_cells(member: GroupMember) -> tuple[str, ...]:
    return (
        member.group,
        member.member_id,
        member.group_instance_id or NO_OFFSET,
        member.client_host,
        member.client_id,
        str(len(member.assignment)),
        assignment_text(member.assignment) or NO_OFFSET,
    )


def assignment_text(assignment: tuple[tuple[str, int], ...]) -> str:
    """``topic(0,1);other(2)``, as kafka-consumer-groups.sh --verbose shows an assignment."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in assignment:
        by_topic.setdefault(topic, []).append(partition)
    return ";".join(
        f"{topic}({','.join(map(str, partitions))})" for topic, partitions in by_topic.items()
    )


def member_json(member: GroupMember) -> dict[str, object]:
    fields = asdict(member)
    fields["assignment"] = [
        {"topic": topic, "partition": partition} for topic, partition in member.assignment
    ]
    return fields


SUBCOMMANDS: dict[str, Callable[[GroupAdmin, argparse.Namespace], Iterator[str]]] = {
    "reset-offsets": _reset,
    "delete": _delete,
    "describe": _describe,
}


def plan_table(plan: list[PlannedOffset]) -> str:
    """One row per partition: the committed offset (``-`` for none) and the new one."""
    rows = [
        (
            row.group,
            row.topic,
            str(row.partition),
            NO_OFFSET if row.committed is None else str(row.committed),
            str(row.new_offset),
        )
        for row in plan
    ]
    header = ("GROUP", "TOPIC", "PARTITION", "COMMITTED", "NEW-OFFSET")
    return fixed_width_table(header, rows, left_aligned={0, 1})

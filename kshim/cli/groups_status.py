"""``kshim groups``: the consumption status table of a running broker's consumer groups
(committed offsets and lag, by the broker's own arithmetic), or one of its admin
subcommands (kshim/cli/groups_command.py)."""

from __future__ import annotations

import argparse

from kshim.broker.groups.consumption_status import PartitionStatus, group_status
from kshim.cli.admin_options import (
    Commands,
    add_command,
    add_command_config,
    bootstrap_argument,
    broker_failures,
    command_security,
)
from kshim.cli.config_sources import DEFAULT_LISTEN
from kshim.cli.errors import GROUPS_PROGRAM, print_lines
from kshim.cli.groups_command import add_group_admin_parsers, run_group_admin
from kshim.cli.status_tables import consumption_table
from kshim.cli.text_table import json_or_table
from kshim.client.group_query import GroupOffsets, QueryError, query_groups
from kshim.storage.interface import TopicPartition


def add_groups_parser(commands: Commands) -> None:
    groups_help = "consumer groups: committed offsets and lag"
    groups = add_command(commands, "groups", groups_help, GROUPS_PROGRAM)
    groups.add_argument(
        "--bootstrap",
        default=DEFAULT_LISTEN,
        type=bootstrap_argument,
        help="a running broker, host:port",
    )
    groups.add_argument("--group", help="only this group (default: every group)")
    add_command_config(groups)
    groups.add_argument("--json", action="store_true", help="one JSON object per partition")
    add_group_admin_parsers(groups)


def run_groups(arguments: argparse.Namespace) -> None:
    """``kshim groups``: its admin subcommand, or with none the groups' consumption status
    table."""
    if arguments.groups_command:
        run_group_admin(arguments)
    else:
        show_groups(arguments)


def show_groups(arguments: argparse.Namespace) -> None:
    """Prints the consumption status table of a running broker's groups; raises
    CommandFailed when the broker cannot be asked or the group does not exist, UsageError
    for a --command-config that cannot be used."""
    security = command_security(arguments.command_config)
    with broker_failures(arguments.bootstrap, (QueryError,), attempt="query"):
        groups = query_groups(arguments.bootstrap, arguments.group, security=security)
    for line in json_or_table(status_rows(groups), arguments.json, consumption_table):
        print_lines(line)


def status_rows(groups: list[GroupOffsets]) -> list[PartitionStatus]:
    """The consumption status rows of what a broker said of its groups, by the broker's own
    arithmetic (lag), so that ``kshim groups`` reads as the broker's view would."""
    rows: list[PartitionStatus] = []
    for group in groups:
        committed = {TopicPartition(*key): offset for key, offset in group.committed.items()}
        log_ends = {TopicPartition(*key): offset for key, offset in group.log_ends.items()}
        assigned = [TopicPartition(*key) for key in group.assigned]
        rows += group_status(group.group_id, committed, log_ends, assigned, group.members)
    return rows

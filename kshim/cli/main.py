"""The ``kshim`` command line: parses arguments and calls library functions.

Expected failures end in one ``kshim: error:`` line and exit status 2 (usage) or 1 (run
time), as kshim/cli/errors.py says; only kshim's own bugs show a traceback.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import os
import sys
from collections.abc import Callable

from kshim.broker.clock import wall_clock_ms
from kshim.broker.delay.status import delay_status
from kshim.broker.groups.consumption_status import PartitionStatus, group_status
from kshim.cli.acls import ACLS_PROGRAM, add_acls_parser, run_acls
from kshim.cli.admin_options import (
    add_command,
    add_command_config,
    bootstrap_argument,
    broker_failures,
    command_security,
)
from kshim.cli.config_sources import (
    DEFAULT_DATA_DIR,
    DEFAULT_LISTEN,
    load_config,
)
from kshim.cli.errors import (
    DELAYS_PROGRAM,
    FAILURE_STATUS,
    GROUPS_PROGRAM,
    PROGRAM,
    USAGE_STATUS,
    CommandFailed,
    OneLineArgumentParser,
    OutputClosed,
    UsageError,
    print_error,
    print_lines,
)
from kshim.cli.gateway_command import GATEWAY_PROGRAM, add_gateway_parser, run_gateway
from kshim.cli.groups_command import add_group_admin_parsers, run_group_admin
from kshim.cli.produce_command import PRODUCE_PROGRAM, add_produce_parser, run_produce
from kshim.cli.serve_command import add_serve_parser, run_broker, serve, stopped_line
from kshim.cli.status_tables import consumption_table, delays_table
from kshim.cli.tail_command import TAIL_PROGRAM, add_tail_parser, run_tail
from kshim.cli.text_table import json_or_table
from kshim.cli.topics_command import TOPICS_PROGRAM, add_topics_parser, run_topics
from kshim.cli.transactions_command import (
    TRANSACTIONS_PROGRAM,
    add_transactions_parser,
    run_transactions,
)
from kshim.cli.users import USERS_PROGRAM, add_users_parser, run_users
from kshim.client.group_query import GroupOffsets, QueryError, query_groups
from kshim.storage.interface import TopicPartition
from kshim.storage.meta.lmdb_types import LmdbFailed
from kshim.storage.schedule.delay_records import ScheduleLayoutError
from kshim.storage.schedule.delay_store import DelayStore

__all__ = ["build_parser", "load_config", "main", "serve", "stopped_line"]

log = logging.getLogger(__name__)
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineArgumentParser(prog=PROGRAM, description="A Kafka-compatible broker.")
    parser.add_argument("--version", action=VersionAction)
    commands = parser.add_subparsers(dest="command", required=True)
    add_serve_parser(commands)
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
    add_tail_parser(commands)
    add_produce_parser(commands)
    add_topics_parser(commands)
    add_transactions_parser(commands)
    add_users_parser(commands)
    add_acls_parser(commands)
    delays_help = "delayed delivery: pending records per topic, next due, lateness"
    delays = add_command(commands, "delays", delays_help, DELAYS_PROGRAM)
    delays.add_argument(
        "--data-dir", default=DEFAULT_DATA_DIR, help=f"the broker's (default {DEFAULT_DATA_DIR})"
    )
    delays.add_argument("--json", action="store_true", help="one JSON object per topic")
    delays.add_argument(
        "--export-to",
        metavar="BOOTSTRAP",
        help="produce the stopped broker's pending delayed records to T.delay at this Kafka "
        "cluster (or gateway), each due when it was due here, for gateways given --delay "
        "(docs/gateway.md, Moving to a Kafka cluster)",
    )
    delays.add_argument(
        "--export-config",
        metavar="FILE",
        help="with --export-to: a Kafka client properties file (security.protocol, TLS, SASL)",
    )
    add_gateway_parser(commands)
    return parser


class VersionAction(argparse.Action):
    """``--version``: reads the package metadata only when asked (argparse's own version
    action wants the text up front, which would cost every start a metadata lookup)."""

    def __init__(self, option_strings: list[str], dest: str, **_: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(f"kshim {package_version()}")
        parser.exit()


def package_version() -> str:
    """kshim's installed version, from the package metadata; says it is unknown when kshim
    runs from a source tree that was never installed."""
    try:
        return importlib.metadata.version("kshim")
    except importlib.metadata.PackageNotFoundError:
        return "(version unknown: not installed)"


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


def show_delays(arguments: argparse.Namespace) -> None:
    """Prints the delayed-delivery status of the broker whose data directory is given (read
    from the directory while the broker runs, or after it stopped); raises CommandFailed
    when that is no kshim data directory."""
    data_dir = arguments.data_dir
    if not os.path.isdir(os.path.join(data_dir, "meta")):
        raise CommandFailed(f"{data_dir} is not a kshim data directory (no meta/ in it)")
    if arguments.export_to:
        export_pending(data_dir, arguments.export_to, arguments.export_config)
        return
    store = DelayStore(os.path.join(data_dir, "delays"), readonly=True)
    try:
        rows = delay_status(store.summary(), wall_clock_ms())
    except (LmdbFailed, OSError, ScheduleLayoutError) as error:
        raise CommandFailed(f"cannot read the delay schedule in {data_dir}: {error}") from error
    finally:
        store.close()
    for line in json_or_table(rows, arguments.json, delays_table):
        print_lines(line)


def export_pending(data_dir: str, bootstrap: str, config: str | None) -> None:
    """``kshim delays --export-to``: kshim/cli/delays_export.py."""
    # Imported only when asked for: aiokafka.
    from kshim.cli.delays_export import export_delays, pending_records

    security = command_security(config)
    try:
        records = pending_records(data_dir)
    except (LmdbFailed, OSError, ScheduleLayoutError) as error:
        raise CommandFailed(f"cannot read the delay schedule in {data_dir}: {error}") from error
    try:
        count = export_delays(records, bootstrap, security)
    except Exception as error:  # aiokafka's: the cluster refused or did not answer
        raise CommandFailed(f"cannot export to {bootstrap}: {error}") from error
    print(f"exported {count} pending delayed records to {bootstrap}", flush=True)


def run_groups(arguments: argparse.Namespace) -> None:
    """``kshim groups``: its admin subcommand, or with none the groups' consumption status
    table."""
    if arguments.groups_command:
        run_group_admin(arguments)
    else:
        show_groups(arguments)


# Each command's name in its error messages and what runs it; any other runs the broker.
COMMANDS: dict[str, tuple[str, Callable[[argparse.Namespace], None]]] = {
    "groups": (GROUPS_PROGRAM, run_groups),
    "tail": (TAIL_PROGRAM, run_tail),
    "produce": (PRODUCE_PROGRAM, run_produce),
    "topics": (TOPICS_PROGRAM, run_topics),
    "transactions": (TRANSACTIONS_PROGRAM, run_transactions),
    "users": (USERS_PROGRAM, run_users),
    "acls": (ACLS_PROGRAM, run_acls),
    "delays": (DELAYS_PROGRAM, show_delays),
    "gateway": (GATEWAY_PROGRAM, run_gateway),
}


def main(argv: list[str] | None = None) -> int:
    """Runs the command ``argv`` (default: this process's arguments); returns the exit
    status."""
    arguments = build_parser().parse_args(argv)
    program, run = COMMANDS.get(arguments.command, (PROGRAM, run_broker))
    try:
        run(arguments)
    except UsageError as error:
        print_error(str(error), program)
        return USAGE_STATUS
    except CommandFailed as error:
        print_error(str(error), program)
        return FAILURE_STATUS
    except OutputClosed:
        pass  # the reader of the output has gone (``| head``): nothing more to say
    return 0


if __name__ == "__main__":
    sys.exit(main())

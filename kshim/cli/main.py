"""The ``kshim`` command line: parses arguments and calls library functions.

Expected failures end in one ``kshim: error:`` line and exit status 2 (usage) or 1 (run
time), as kshim/cli/errors.py says; only kshim's own bugs show a traceback.

Each command's module is imported only when that command runs (``LOADERS``, as the API
route table loads its routes), so that ``kshim topics list`` pays for the topics client and
not for the broker, the gateway and every other command: about 0.2 s of start-up instead
of 1.1. A parser of every command is built for ``kshim --help``, an unknown command and
the reference pages (``build_parser()``).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
from collections.abc import Callable
from dataclasses import dataclass

from kshim.cli.admin_options import Commands
from kshim.cli.errors import (
    FAILURE_STATUS,
    PROGRAM,
    USAGE_STATUS,
    CommandFailed,
    OneLineArgumentParser,
    OutputClosed,
    UsageError,
    print_error,
)

__all__ = ["build_parser", "main"]


@dataclass(frozen=True, slots=True)
class Command:
    program: str  # the command's name in its error messages
    add_parser: Callable[[Commands], None]
    run: Callable[[argparse.Namespace], None]


def _serve() -> Command:
    from kshim.cli.serve_command import add_serve_parser, run_broker

    return Command(PROGRAM, add_serve_parser, run_broker)


def _groups() -> Command:
    from kshim.cli.errors import GROUPS_PROGRAM
    from kshim.cli.groups_status import add_groups_parser, run_groups

    return Command(GROUPS_PROGRAM, add_groups_parser, run_groups)


def _tail() -> Command:
    from kshim.cli.tail_command import TAIL_PROGRAM, add_tail_parser, run_tail

    return Command(TAIL_PROGRAM, add_tail_parser, run_tail)


def _produce() -> Command:
    from kshim.cli.produce_command import PRODUCE_PROGRAM, add_produce_parser, run_produce

    return Command(PRODUCE_PROGRAM, add_produce_parser, run_produce)


def _topics() -> Command:
    from kshim.cli.topics_command import TOPICS_PROGRAM, add_topics_parser, run_topics

    return Command(TOPICS_PROGRAM, add_topics_parser, run_topics)


def _transactions() -> Command:
    from kshim.cli.transactions_command import (
        TRANSACTIONS_PROGRAM,
        add_transactions_parser,
        run_transactions,
    )

    return Command(TRANSACTIONS_PROGRAM, add_transactions_parser, run_transactions)


def _users() -> Command:
    from kshim.cli.users import USERS_PROGRAM, add_users_parser, run_users

    return Command(USERS_PROGRAM, add_users_parser, run_users)


def _acls() -> Command:
    from kshim.cli.acls import ACLS_PROGRAM, add_acls_parser, run_acls

    return Command(ACLS_PROGRAM, add_acls_parser, run_acls)


def _delays() -> Command:
    from kshim.cli.delays_command import add_delays_parser, show_delays
    from kshim.cli.errors import DELAYS_PROGRAM

    return Command(DELAYS_PROGRAM, add_delays_parser, show_delays)


def _gateway() -> Command:
    from kshim.cli.gateway_command import GATEWAY_PROGRAM, add_gateway_parser, run_gateway

    return Command(GATEWAY_PROGRAM, add_gateway_parser, run_gateway)


# Every command, in the order ``kshim --help`` lists them.
LOADERS: dict[str, Callable[[], Command]] = {
    "serve": _serve,
    "groups": _groups,
    "tail": _tail,
    "produce": _produce,
    "topics": _topics,
    "transactions": _transactions,
    "users": _users,
    "acls": _acls,
    "delays": _delays,
    "gateway": _gateway,
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser: of every command, or of the command ``only`` alone."""
    parser = OneLineArgumentParser(prog=PROGRAM, description="A Kafka-compatible broker.")
    parser.add_argument("--version", action=VersionAction)
    commands = parser.add_subparsers(dest="command", required=True)
    for name, load in LOADERS.items():
        if only is None or name == only:
            load().add_parser(commands)
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


def main(argv: list[str] | None = None) -> int:
    """Runs the command ``argv`` (default: this process's arguments); returns the exit
    status."""
    given = sys.argv[1:] if argv is None else argv
    # The first word that is no option names the command (``kshim`` has no option taking
    # a value); anything else gets every command's parser, and its usage or error.
    named = next((word for word in given if not word.startswith("-")), None)
    arguments = build_parser(named if named in LOADERS else None).parse_args(given)
    command = LOADERS[arguments.command]()
    try:
        command.run(arguments)
    except UsageError as error:
        print_error(str(error), command.program)
        return USAGE_STATUS
    except CommandFailed as error:
        print_error(str(error), command.program)
        return FAILURE_STATUS
    except OutputClosed:
        pass  # the reader of the output has gone (``| head``): nothing more to say
    return 0


if __name__ == "__main__":
    sys.exit(main())

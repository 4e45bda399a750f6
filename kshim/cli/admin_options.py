"""What every admin command's subcommands take (``kshim topics``, ``transactions``,
``groups``' subcommands), as Kafka's tools do: ``--bootstrap``, ``--command-config`` (a
client properties file) and ``--json``."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import TypeVar

from kshim.cli.config_sources import DEFAULT_LISTEN
from kshim.cli.errors import CommandFailed, OneLineArgumentParser, reason

AdminT = TypeVar("AdminT")

# Adds one subcommand (name, help) with the common options; returns its parser.
AddSubcommand = Callable[[str, str], OneLineArgumentParser]


def add_common_options(
    parser: OneLineArgumentParser,
    bootstrap_type: Callable[[str], str],
    bootstrap_default: str = DEFAULT_LISTEN,
    json_help: str = "one JSON object per line",
) -> None:
    """--bootstrap, --command-config and --json on ``parser``."""
    shown = DEFAULT_LISTEN if bootstrap_default == argparse.SUPPRESS else bootstrap_default
    parser.add_argument(
        "--bootstrap",
        default=bootstrap_default,
        type=bootstrap_type,
        help=f"a running broker, host:port (default {shown})",
    )
    parser.add_argument(
        "--command-config", metavar="FILE", help="a Kafka client properties file (PLAINTEXT only)"
    )
    parser.add_argument("--json", action="store_true", help=json_help)


def subcommands(
    parent: OneLineArgumentParser,
    dest: str,
    names: Iterable[str],
    program: str,
    bootstrap_type: Callable[[str], str],
    required: bool = True,
    bootstrap_default: str = DEFAULT_LISTEN,
) -> AddSubcommand:
    """The subcommands ``names`` of ``parent`` (chosen one in ``dest``), each taking the
    common options; errors are said as ``program``. With ``bootstrap_default`` set to
    argparse.SUPPRESS a --bootstrap given to ``parent`` itself is kept."""
    common = OneLineArgumentParser(add_help=False)
    add_common_options(common, bootstrap_type, bootstrap_default)
    actions = parent.add_subparsers(
        dest=dest, required=required, metavar="{" + ",".join(names) + "}"
    )

    def add(name: str, help_text: str) -> OneLineArgumentParser:
        action: OneLineArgumentParser = actions.add_parser(name, parents=[common], help=help_text)
        action.error_program = program
        return action

    return add


def run_subcommand(
    bootstrap: str,
    admin: Callable[[str], AbstractContextManager[AdminT]],
    subcommand: Callable[[AdminT, argparse.Namespace], Iterable[str]],
    arguments: argparse.Namespace,
    refusals: tuple[type[Exception], ...],
) -> None:
    """Runs ``subcommand`` on an ``admin`` connected to ``bootstrap``, printing its lines
    as they come; raises CommandFailed when the broker cannot be reached or refuses (one
    of ``refusals``)."""
    try:
        with admin(bootstrap) as connected:
            for line in subcommand(connected, arguments):
                print(line, flush=True)
    except OSError as error:
        raise CommandFailed(f"cannot reach {bootstrap}: {reason(error)}") from error
    except refusals as error:
        raise CommandFailed(str(error)) from error

"""What every admin command's subcommands take (``kshim topics``, ``transactions``,
``groups``' subcommands), as Kafka's tools do: ``--bootstrap``, ``--command-config`` (a
client properties file) and ``--json``."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable

from kshim.cli.config_sources import DEFAULT_LISTEN
from kshim.cli.errors import OneLineArgumentParser

# Adds one subcommand (name, help) with the common options; returns its parser.
AddSubcommand = Callable[[str, str], OneLineArgumentParser]


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
    shown = DEFAULT_LISTEN if bootstrap_default == argparse.SUPPRESS else bootstrap_default
    common.add_argument(
        "--bootstrap",
        default=bootstrap_default,
        type=bootstrap_type,
        help=f"a running broker, host:port (default {shown})",
    )
    common.add_argument(
        "--command-config", metavar="FILE", help="a Kafka client properties file (PLAINTEXT only)"
    )
    common.add_argument("--json", action="store_true", help="one JSON object per line")
    actions = parent.add_subparsers(
        dest=dest, required=required, metavar="{" + ",".join(names) + "}"
    )

    def add(name: str, help_text: str) -> OneLineArgumentParser:
        action: OneLineArgumentParser = actions.add_parser(name, parents=[common], help=help_text)
        action.error_program = program
        return action

    return add

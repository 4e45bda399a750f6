"""The argparse types and option kinds that several ``kshim`` commands take.

Light on purpose: ``kshim serve`` imports it (its --listen), and the broker process loads
none of the admin commands' modules (kshim/cli/serve_command.py).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable


def accepted_text(text: str, parse: Callable[[str], object]) -> str:
    """``text`` itself when ``parse`` accepts it: the argparse type of an option whose value
    is kept as written but checked at once. Raises argparse.ArgumentTypeError with the
    message of ``parse``'s ValueError, which argparse prints as the option's error."""
    try:
        parse(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def partition_argument(text: str) -> int:
    """argparse type of --partition: a partition number, 0 or more."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a partition number")
    return int(text)


def add_list_option(
    parser: argparse.ArgumentParser,
    flag: str,
    metavar: str,
    help_text: str | None = None,
    value_type: Callable[[str], object] = str,
) -> None:
    """``flag`` on ``parser``, taking one or more values and repeatable, every value kept in
    one list (empty when the flag is not given), as Kafka's tools take --config or
    --add-config: ``--config a=1 b=2 --config c=3``."""
    parser.add_argument(
        flag,
        action="extend",
        nargs="+",
        type=value_type,
        default=[],
        metavar=metavar,
        help=help_text,
    )

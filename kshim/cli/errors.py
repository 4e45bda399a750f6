"""How the ``kshim`` command ends on a mistake: one line on stderr, never a traceback.

Every expected failure is one line, ``kshim: error: ...`` (``kshim groups: error: ...``
from the groups tool, a client of a broker rather than the broker), and the exit status
says whose it is: 2 for a usage mistake (a bad flag, a bad configuration value), as
argparse exits on a bad flag, and 1 for a failure at run time (the port is taken, the
data directory cannot be used, the broker cannot be reached). Anything else is a bug of
kshim's and keeps its traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn

from kshim.client.errors import reason

PROGRAM = "kshim"
GROUPS_PROGRAM = "kshim groups"
DELAYS_PROGRAM = "kshim delays"
USAGE_STATUS = 2
FAILURE_STATUS = 1


class UsageError(Exception):
    """The command line or the configuration asks for something invalid (exit status 2)."""


class CommandFailed(Exception):
    """The command was well formed but could not be carried out (exit status 1)."""


class OneLineArgumentParser(argparse.ArgumentParser):
    """An argparse parser whose errors are the one ``kshim: error:`` line (its
    ``error_program`` in place of ``kshim``), without the usage block argparse prints
    first, and saying where to find that usage."""

    error_program = PROGRAM

    def error(self, message: str) -> NoReturn:
        print_error(f"{message}; see '{self.prog} --help'", self.error_program)
        sys.exit(USAGE_STATUS)


class OutputClosed(Exception):
    """Whoever reads the output stopped reading (``kshim tail T | head``): the command
    stops quietly, as Unix tools do when their pipe closes. Not an OSError, so that the
    commands' handlers of connection errors never take it for the broker's."""


def print_lines(text: str) -> None:
    """Prints ``text`` and flushes it; raises OutputClosed when the reader has gone, after
    which nothing more may reach stdout (the interpreter's own flush at exit would fail
    again and print a traceback)."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise OutputClosed from None


def print_error(message: str, program: str = PROGRAM) -> None:
    print(f"{program}: error: {message}", file=sys.stderr, flush=True)


def print_warning(message: str) -> None:
    print(f"{PROGRAM}: warning: {message}", file=sys.stderr, flush=True)


def data_directory_problem(data_dir: str, error: OSError) -> str:
    """One line naming ``data_dir`` and why the broker could not use it."""
    where = f" ({error.filename})" if error.filename not in (None, data_dir) else ""
    return f"cannot use data directory {data_dir}: {reason(error)}{where}"

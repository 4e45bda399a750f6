"""``kshim users``: the SCRAM credentials users log in with (KIP-554), as Kafka's
``kafka-configs.sh --entity-type users --add-config 'SCRAM-SHA-256=[...]'`` and
``kafka-storage.sh format --add-scram`` set them.

- ``add NAME --mechanism M [--iterations N]``: sets NAME's credential of M (replacing it);
  the password from ``--password-file``, ``--password-stdin`` or, on a terminal, a prompt
  (asked twice). As Kafka's admin client, the command salts and hashes the password itself
  and sends the broker the salt and SaltedPassword (AlterUserScramCredentials v0), never
  the password.
- ``list [NAME...]``: users' mechanisms and iteration counts (DescribeUserScramCredentials
  v0); every user when none is named.
- ``remove NAME --mechanism M``.

``add --data-dir DIR`` writes the credential into a stopped broker's data directory
instead, creating it if need be: the first user of a broker whose listeners all ask for
SASL, as ``kafka-storage.sh format --add-scram`` is. It refuses while a broker holds the
directory (its ``.lock``), since that broker would neither see nor keep the change.
``list --data-dir DIR`` reads a data directory's credentials without a broker, and without
its lock (a running broker's too: the store is opened read-only).
"""

from __future__ import annotations

import argparse
import functools
import getpass
import json
import sys
from collections.abc import Callable, Iterator

from kshim.broker.security.scram_credential import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    new_salt,
    salted_password,
)
from kshim.cli.admin_options import Commands, add_admin_command, command_security, run_subcommand
from kshim.cli.errors import CommandFailed, OneLineArgumentParser, UsageError, print_lines
from kshim.cli.text_table import fixed_width_table, json_or_table
from kshim.cli.user_store import add_offline, list_offline
from kshim.client.errors import reason
from kshim.client.topic_admin import AdminError
from kshim.client.user_admin import CredentialListing, SaltedCredential, UserAdmin, user_admin
from kshim.protocol.scram_mechanisms import MECHANISMS
from kshim.storage.meta.scram_store import MAX_USER_BYTES

USERS_PROGRAM = "kshim users"


def add_users_parser(commands: Commands) -> None:
    """Adds ``users`` and its subcommands to the ``kshim`` parser's ``commands``."""
    users_help = "SCRAM users: add, list, remove"
    add = add_admin_command(commands, "users", users_help, USERS_PROGRAM, SUBCOMMANDS)
    _add_add(add("add", "set a user's SCRAM credential (a new password)"))
    listing = add("list", "users' SCRAM mechanisms and iterations")
    listing.add_argument(
        "names", nargs="*", metavar="NAME", help="only these users (default: every user)"
    )
    listing.add_argument(
        "--data-dir",
        metavar="DIR",
        help="read this broker's data directory (running or stopped), not over the wire",
    )
    remove = add("remove", "remove a user's SCRAM credential")
    remove.add_argument("name", metavar="NAME")
    _add_mechanism(remove)


def _add_add(parser: OneLineArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME")
    _add_mechanism(parser)
    parser.add_argument(
        "--iterations",
        type=iterations,
        default=MIN_ITERATIONS,
        help=f"the salting's iteration count, {MIN_ITERATIONS} to {MAX_ITERATIONS} "
        f"(default {MIN_ITERATIONS})",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--password-file", metavar="FILE", help="the password is this file's")
    source.add_argument(
        "--password-stdin", action="store_true", help="the password is standard input's"
    )
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        help="write into this stopped broker's data directory, not over the wire",
    )


def _add_mechanism(parser: OneLineArgumentParser) -> None:
    parser.add_argument("--mechanism", required=True, choices=MECHANISMS)


def iterations(text: str) -> int:
    """argparse type of --iterations: an integer Kafka accepts, 4096 to 16384."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not MIN_ITERATIONS <= value <= MAX_ITERATIONS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an integer from {MIN_ITERATIONS} to {MAX_ITERATIONS}"
        )
    return value


def run_users(arguments: argparse.Namespace) -> None:
    """Runs one ``kshim users`` subcommand and prints its result.

    Raises UsageError for a --command-config that cannot be used, an empty name, or a
    password that cannot be read; CommandFailed when the broker cannot be reached, refuses
    the authentication or answers with an error, or the data directory cannot be written.
    """
    subcommand = SUBCOMMANDS[arguments.users_command]
    if arguments.users_command == "add":
        if not arguments.name:
            raise UsageError("the user name is empty")
        if arguments.data_dir is None:
            command_security(arguments.command_config)  # its mistakes before the password
        credential = salted(arguments.mechanism, read_password(arguments), arguments.iterations)
        if arguments.data_dir is not None:
            if len(arguments.name.encode("utf-8")) > MAX_USER_BYTES:
                raise UsageError(f"a user name is at most {MAX_USER_BYTES} bytes of UTF-8")
            add_offline(arguments.data_dir, arguments.name, arguments.mechanism, credential)
            print(added_line(arguments, arguments.data_dir))
            return
        subcommand = functools.partial(_add, credential=credential)
    elif arguments.users_command == "list" and arguments.data_dir is not None:
        listed = list_offline(arguments.data_dir, arguments.names)
        try:
            for line in _list_lines(*listed, arguments):
                print_lines(line)
        except AdminError as error:
            raise CommandFailed(str(error)) from None
        return
    run_subcommand(arguments.bootstrap, user_admin, subcommand, arguments, (AdminError,))


def read_password(arguments: argparse.Namespace) -> str:
    """The password of ``add``: the file's or standard input's, one final line end
    dropped, or asked twice on the terminal. Raises UsageError when there is none, it is
    empty, it cannot be read, or the two answers differ."""
    if arguments.password_file is not None:
        password = _password_file(arguments.password_file)
    elif arguments.password_stdin:
        password = _one_line(sys.stdin.read())
    elif sys.stdin.isatty():
        password = getpass.getpass(f"Password of {arguments.name}: ")
        if getpass.getpass("The same again: ") != password:
            raise UsageError("the two passwords differ")
    else:
        raise UsageError(
            "no password: give --password-file or --password-stdin, or run on a terminal "
            "to be asked"
        )
    if not password:
        raise UsageError("the password is empty")
    return password


def _password_file(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return _one_line(handle.read())
    except OSError as error:
        raise UsageError(f"cannot read --password-file {path}: {reason(error)}") from None
    except UnicodeDecodeError:
        raise UsageError(f"--password-file {path} is not UTF-8") from None


def _one_line(text: str) -> str:
    return text.removesuffix("\n").removesuffix("\r")


def salted(mechanism: str, password: str, iterations: int) -> SaltedCredential:
    """A new salt and the SaltedPassword of ``password`` with it: what
    AlterUserScramCredentials carries, computed as Kafka's admin client does."""
    salt = new_salt()
    return SaltedCredential(
        salt, salted_password(mechanism, password, salt, iterations), iterations
    )


def _add(
    admin: UserAdmin, arguments: argparse.Namespace, credential: SaltedCredential
) -> Iterator[str]:
    admin.upsert(arguments.name, arguments.mechanism, credential)
    yield added_line(arguments)


def _list(admin: UserAdmin, arguments: argparse.Namespace) -> Iterator[str]:
    yield from _list_lines(*admin.describe(arguments.names), arguments)


def _list_lines(
    listings: list[CredentialListing], missing: list[str], arguments: argparse.Namespace
) -> Iterator[str]:
    """The listing as a table or JSON lines; raises AdminError (after the lines) naming
    the users asked for that have no credential."""
    yield from json_or_table(listings, arguments.json, listing_table)
    if missing:
        raise AdminError(f"no SCRAM credential for user {', '.join(missing)}")


def _remove(admin: UserAdmin, arguments: argparse.Namespace) -> Iterator[str]:
    admin.delete(arguments.name, arguments.mechanism)
    if arguments.json:
        removed = {"user": arguments.name, "mechanism": arguments.mechanism, "removed": True}
        yield json.dumps(removed)
    else:
        yield f"removed the {arguments.mechanism} credential of {arguments.name}"


SUBCOMMANDS: dict[str, Callable[..., Iterator[str]]] = {
    "add": _add,
    "list": _list,
    "remove": _remove,
}


def added_line(arguments: argparse.Namespace, data_dir: str | None = None) -> str:
    """What ``add`` prints: the user, mechanism and iterations, and where it was written
    when not through a broker."""
    if arguments.json:
        added: dict[str, object] = {
            "user": arguments.name,
            "mechanism": arguments.mechanism,
            "iterations": arguments.iterations,
        }
        if data_dir is not None:
            added["data_dir"] = data_dir
        return json.dumps(added)
    line = (
        f"set the {arguments.mechanism} credential of {arguments.name} "
        f"({arguments.iterations} iterations)"
    )
    return line if data_dir is None else f"{line} in {data_dir}; the broker reads it at start"


def listing_table(listings: list[CredentialListing]) -> str:
    rows = [(listing.user, listing.mechanism, str(listing.iterations)) for listing in listings]
    return fixed_width_table(("USER", "MECHANISM", "ITERATIONS"), rows, left_aligned={0, 1})

"""What every command that talks to a running broker takes (``kshim topics``,
``transactions``, ``groups``' subcommands, ``tail``, ``produce`` ...), as Kafka's tools do:
``--bootstrap``, ``--command-config`` (a Kafka client properties file: security.protocol,
TLS and SASL settings, read by ``kshim.client.security``) and ``--json``; and how each says
that the broker could not be reached or refused it."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol, TypeAlias, TypeVar

from kshim.cli.argument_types import accepted_text
from kshim.cli.config_sources import DEFAULT_LISTEN
from kshim.cli.errors import CommandFailed, OneLineArgumentParser, UsageError, print_lines
from kshim.client.errors import broken_off, reason
from kshim.client.frames import MalformedResponseError
from kshim.client.java_properties import load_client_properties
from kshim.client.sasl import AuthenticationFailed
from kshim.client.security import ClientSecurity, ClientSecurityError, client_security
from kshim.client.wire import ConnectionClosedError, WireConnection, connect, parse_bootstrap

AdminT = TypeVar("AdminT")
AdminT_co = TypeVar("AdminT_co", covariant=True)
COMMAND_CONFIG_HELP = (
    "a Kafka client properties file: security.protocol, sasl.mechanism, sasl.jaas.config, "
    "ssl.truststore.location, ssl.keystore.location (PEM) ..."
)


class AdminFactory(Protocol[AdminT_co]):
    """Opens an admin (``topic_admin``, ``group_admin``, ...) on the broker at
    ``bootstrap``, its connections secured as ``security`` says (None: PLAINTEXT)."""

    def __call__(
        self, bootstrap: str, *, security: ClientSecurity | None
    ) -> AbstractContextManager[AdminT_co]: ...


# The ``kshim`` parser's commands, to which each command module adds its own (a string:
# argparse's class takes no type argument at run time).
Commands: TypeAlias = "argparse._SubParsersAction[OneLineArgumentParser]"
# Adds one subcommand (name, help) with the common options; returns its parser.
AddSubcommand = Callable[[str, str], OneLineArgumentParser]


def bootstrap_argument(text: str) -> str:
    """argparse type of --bootstrap: ``text`` if it is host:port."""
    return accepted_text(text, parse_bootstrap)


def add_command(
    commands: Commands, name: str, help_text: str, program: str
) -> OneLineArgumentParser:
    """Adds the command ``name`` to the ``kshim`` parser's ``commands``, its errors said as
    ``program`` (``kshim topics: error: ...``); returns its parser."""
    parser = commands.add_parser(name, help=help_text)
    parser.error_program = program
    return parser


def add_topic_command(
    commands: Commands, name: str, help_text: str, program: str, json_help: str
) -> OneLineArgumentParser:
    """Adds the command ``name`` (``produce``, ``tail``) on one TOPIC of a running broker,
    with the common options; returns its parser."""
    parser = add_command(commands, name, help_text, program)
    parser.add_argument("topic", metavar="TOPIC")
    add_common_options(parser, json_help=json_help)
    return parser


def add_admin_command(
    commands: Commands, name: str, help_text: str, program: str, names: Iterable[str]
) -> AddSubcommand:
    """Adds the admin command ``name`` (``topics``, ``users``, ...) with its subcommands
    ``names``, the one chosen kept as ``<name>_command``; returns what adds each of them."""
    parser = add_command(commands, name, help_text, program)
    return subcommands(parser, f"{name}_command", names, program)


def add_common_options(
    parser: OneLineArgumentParser,
    bootstrap_default: str = DEFAULT_LISTEN,
    json_help: str = "one JSON object per line",
) -> None:
    """--bootstrap, --command-config and --json on ``parser``. With ``bootstrap_default``
    argparse.SUPPRESS, none of them has a default here, so that the value a parent parser
    took is kept."""
    kept = bootstrap_default == argparse.SUPPRESS
    shown = DEFAULT_LISTEN if kept else bootstrap_default
    parser.add_argument(
        "--bootstrap",
        default=bootstrap_default,
        type=bootstrap_argument,
        help=f"a running broker, host:port (default {shown})",
    )
    add_command_config(parser, argparse.SUPPRESS if kept else None)
    json_default: object = argparse.SUPPRESS if kept else False
    parser.add_argument("--json", action="store_true", default=json_default, help=json_help)


def add_command_config(parser: OneLineArgumentParser, default: str | None = None) -> None:
    """--command-config FILE on ``parser``."""
    parser.add_argument(
        "--command-config", metavar="FILE", default=default, help=COMMAND_CONFIG_HELP
    )


def command_security(path: str | None) -> ClientSecurity | None:
    """The security that the Kafka client properties file at ``path`` (--command-config)
    asks for; None without a file.

    Raises UsageError when the file cannot be read, sets what is not supported, or names
    TLS files that cannot be used: they are read here once, so that such a mistake is
    said before anything connects.
    """
    if path is None:
        return None
    try:
        properties = load_client_properties(path)
    except OSError as error:
        raise UsageError(f"cannot read --command-config {path}: {reason(error)}") from None
    except UnicodeDecodeError as error:
        raise UsageError(f"--command-config {path}: {error}") from None
    try:
        security = client_security(properties)
        security.ssl_context()
    except ClientSecurityError as error:
        raise UsageError(f"--command-config {path}: {error}") from None
    return security


def subcommands(
    parent: OneLineArgumentParser,
    dest: str,
    names: Iterable[str],
    program: str,
    required: bool = True,
    bootstrap_default: str = DEFAULT_LISTEN,
) -> AddSubcommand:
    """The subcommands ``names`` of ``parent`` (chosen one in ``dest``), each taking the
    common options; errors are said as ``program``. With ``bootstrap_default`` set to
    argparse.SUPPRESS a --bootstrap given to ``parent`` itself is kept."""
    common = OneLineArgumentParser(add_help=False)
    add_common_options(common, bootstrap_default)
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
    admin: AdminFactory[AdminT],
    subcommand: Callable[[AdminT, argparse.Namespace], Iterable[str]],
    arguments: argparse.Namespace,
    refusals: tuple[type[Exception], ...],
) -> None:
    """Runs ``subcommand`` on an ``admin`` connected to ``bootstrap`` as the
    --command-config file of ``arguments`` says, printing its lines as they come.

    Raises UsageError for a --command-config that cannot be used (command_security);
    CommandFailed when the broker cannot be reached, refuses the authentication, or
    refuses the request (one of ``refusals``).
    """
    security = command_security(arguments.command_config)
    with broker_failures(bootstrap, refusals), admin(bootstrap, security=security) as connected:
        for line in subcommand(connected, arguments):
            print_lines(line)


@contextmanager
def broker_failures(
    bootstrap: str, refusals: tuple[type[Exception], ...], attempt: str = "reach"
) -> Iterator[None]:
    """Raises CommandFailed for what goes wrong in its block, talking to the broker at
    ``bootstrap``: it cannot be reached (``cannot {attempt} ...``), refuses the
    authentication, or refuses the request (one of ``refusals``)."""
    try:
        yield
    except OSError as error:
        raise CommandFailed(f"cannot {attempt} {bootstrap}: {reason(error)}") from error
    except AuthenticationFailed as error:
        raise CommandFailed(f"cannot authenticate to {bootstrap}: {error}") from error
    except refusals as error:
        raise CommandFailed(str(error)) from error


@contextmanager
def record_connection(
    bootstrap: str,
    security: ClientSecurity | None,
    client_id: str,
    read_timeout_s: float,
    what: str,
    refusal: type[Exception],
) -> Iterator[WireConnection]:
    """A connection to the broker at ``bootstrap`` to ``what`` (``read``, ``write``) records,
    closed after its block. Raises CommandFailed as broker_failures does (``refusal`` the
    request's), and for a broker that closes the connection or answers something malformed,
    with the hint about secured listeners that broken_off gives a plain connection."""
    with broker_failures(bootstrap, (refusal,)):
        try:
            with connect(
                bootstrap, read_timeout_s, client_id=client_id, security=security
            ) as connection:
                yield connection
        except (ConnectionClosedError, MalformedResponseError) as error:
            # Before broker_failures sees it: a closed connection is an OSError too.
            raise CommandFailed(broken_off(bootstrap, what, error, security)) from error

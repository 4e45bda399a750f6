"""``kshim produce``: write lines of standard input to a topic as records, as Kafka's
kafka-console-producer.sh and ``kcat -P`` do, to a running broker (kshim or any Kafka
broker).

Each line is one record, its line end dropped; with ``-K SEP`` the text before the first
SEP is the key and the rest the value (a line without SEP has no key, as with kcat).
``-H NAME=VALUE`` adds a header to every record. A keyed record goes to the partition
Kafka's Java producer would choose (murmur2 of the key), so it lands beside the same key
written by Spark or Kafka Connect; unkeyed ones go to one partition per batch, as Kafka's
sticky partitioner does; ``--partition`` names one. Lines are sent as they arrive, in
batches of what one read of standard input returns, so typing works as piping does.

``--acks`` is Kafka's acks (all, 1 or 0; the ``acks`` of the --command-config file when
not given, else all). Nothing is printed; ``--json`` prints one JSON object per record
with the partition and offset it was written at (null offsets under acks=0).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator

from kshim.cli.admin_options import Commands, add_topic_command, command_security, record_connection
from kshim.cli.argument_types import partition_argument
from kshim.cli.errors import UsageError, print_lines
from kshim.client.java_properties import load_client_properties
from kshim.client.topic_writer import TopicWriter, WriteError, Written
from kshim.protocol.records import Header, Record

PRODUCE_PROGRAM = "kshim produce"
CLIENT_ID = "kshim-produce"
READ_TIMEOUT_S = 60.0  # a Produce waits for the fsync of its batch, at most its timeout
STDIN_CHUNK_BYTES = 1 << 20
ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}


def add_produce_parser(commands: Commands) -> None:
    """Adds ``produce`` to the ``kshim`` parser's ``commands``."""
    produce = add_topic_command(
        commands,
        "produce",
        "write lines of standard input as records",
        PRODUCE_PROGRAM,
        json_help="one JSON object per record written",
    )
    produce.add_argument(
        "-K", "--key-separator", metavar="SEP", help="the key is the text before SEP"
    )
    produce.add_argument(
        "-H",
        "--header",
        dest="headers",
        action="append",
        type=header_argument,
        default=[],
        metavar="NAME=VALUE",
        help="a header on every record, repeatable",
    )
    produce.add_argument("--acks", choices=sorted(ACKS), help="Kafka's acks (default all)")
    produce.add_argument(
        "--partition", type=partition_argument, metavar="P", help="only this partition"
    )


def header_argument(text: str) -> Header:
    """argparse type of -H: ``NAME=VALUE`` (kcat's form), the value as UTF-8."""
    name, separator, value = text.partition("=")
    if not separator or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE")
    return name, value.encode("utf-8")


def run_produce(arguments: argparse.Namespace) -> None:
    """Writes standard input's lines until its end (or Ctrl-C).

    Raises UsageError for a --command-config that cannot be used or an acks it does not
    know; CommandFailed when the broker cannot be reached, refuses the authentication, or
    refuses the topic or a batch (the lines before it are written).
    """
    security = command_security(arguments.command_config)
    acks = _acks(arguments)
    try:
        with record_connection(
            arguments.bootstrap, security, CLIENT_ID, READ_TIMEOUT_S, "write", WriteError
        ) as connection:
            writer = TopicWriter(connection, arguments.topic, acks, arguments.partition)
            for lines in _line_batches(sys.stdin.buffer.fileno()):
                records = [_record(line, arguments) for line in lines]
                _report(writer.write(records), arguments.json)
    except KeyboardInterrupt:
        return  # what was sent before Ctrl-C stays written


def _acks(arguments: argparse.Namespace) -> int:
    if arguments.acks is not None:
        return ACKS[arguments.acks]
    if arguments.command_config is None:
        return ACKS["all"]
    configured = load_client_properties(arguments.command_config).get("acks", "all")
    if configured not in ACKS:
        raise UsageError(
            f"--command-config {arguments.command_config}: acks must be all, 1 or 0, "
            f"not {configured!r}"
        )
    return ACKS[configured]


def _line_batches(descriptor: int) -> Iterator[list[bytes]]:
    """The complete lines of each read of ``descriptor`` (a partial last line waits for
    the next read), then the unfinished line at its end; line ends (\\n, \\r\\n) dropped."""
    pending = b""
    while chunk := os.read(descriptor, STDIN_CHUNK_BYTES):
        *lines, pending = (pending + chunk).split(b"\n")
        if lines:
            yield [line.removesuffix(b"\r") for line in lines]
    if pending:
        yield [pending.removesuffix(b"\r")]


def _record(line: bytes, arguments: argparse.Namespace) -> Record:
    key = None
    if arguments.key_separator:
        separator = arguments.key_separator.encode("utf-8")
        if separator in line:
            key, line = line.split(separator, 1)
    return Record(0, time.time_ns() // 1_000_000, key, line, tuple(arguments.headers))


def _report(written: list[Written], as_json: bool) -> None:
    if not as_json:
        return
    for batch in written:
        for index in range(batch.count):
            offset = None if batch.base_offset < 0 else batch.base_offset + index
            print_lines(json.dumps({"partition": batch.partition, "offset": offset}))

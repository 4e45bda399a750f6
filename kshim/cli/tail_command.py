"""``kshim tail``: print a topic's records as they arrive, as Kafka's kafka-console-consumer.sh
does, from a running broker (kshim or any Kafka broker) and without a consumer group: no
offsets are committed and no group is joined.

It starts at the end (``--from-beginning``: at the log start) of every partition, or of the
one named, and follows until Ctrl-C, until ``--max-records`` were printed, or until
``--timeout-ms`` passed without a new record (kafka-console-consumer.sh's --max-messages
and --timeout-ms). ``--full`` reads ``TOPIC.full``, kshim's full-data view (the latest
record of each key). Only committed records are shown (read_committed).

Each record is one line of tab-separated fields: offset, partition, timestamp (UTC),
key, value and headers. A key, value or header value that is UTF-8 is shown as text, its
control characters escaped so that a record stays one line; any other bytes as ``0x``
and hex; no value at all as ``null``. ``--json`` prints one JSON object per record
instead, exactly: text as a JSON string, other bytes as ``{"base64": ...}``, none as
null, the timestamp in epoch milliseconds.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import json
import time

from kshim.cli.admin_options import Commands, add_topic_command, command_security, record_connection
from kshim.cli.argument_types import partition_argument
from kshim.cli.errors import OutputClosed, print_lines
from kshim.client.list_offsets import EARLIEST, LATEST
from kshim.client.topic_reader import ReadError, ReadRecord, TopicReader

TAIL_PROGRAM = "kshim tail"
CLIENT_ID = "kshim-tail"
FULL_VIEW_SUFFIX = ".full"
# How long one Fetch waits at the broker for a record: Ctrl-C and --timeout-ms are noticed
# within it (a consumer's fetch.max.wait.ms is 500 ms too).
FETCH_WAIT_MS = 500
# The connection's read deadline: a Fetch answers within its wait, other requests at once.
READ_TIMEOUT_S = 30.0
ESCAPES = {code: f"\\x{code:02x}" for code in [*range(0x20), 0x7F]} | {
    ord("\t"): "\\t",
    ord("\n"): "\\n",
    ord("\r"): "\\r",
}


def add_tail_parser(commands: Commands) -> None:
    """Adds ``tail`` to the ``kshim`` parser's ``commands``."""
    tail = add_topic_command(
        commands,
        "tail",
        "print a topic's records as they arrive",
        TAIL_PROGRAM,
        json_help="one JSON object per record",
    )
    tail.add_argument(
        "--from-beginning", action="store_true", help="start at the log start, not at the end"
    )
    tail.add_argument("--full", action="store_true", help="read TOPIC.full, the full-data view")
    tail.add_argument(
        "--partition", type=partition_argument, metavar="P", help="only this partition"
    )
    tail.add_argument(
        "--max-records", type=count_argument, metavar="N", help="stop after N records"
    )
    tail.add_argument(
        "--timeout-ms",
        type=count_argument,
        metavar="MS",
        help="stop after MS milliseconds without a new record (default: follow until Ctrl-C)",
    )


def count_argument(text: str) -> int:
    """argparse type of --max-records and --timeout-ms: a whole number, 0 or more."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number")
    return int(text)


def run_tail(arguments: argparse.Namespace) -> None:
    """Prints the records of the topic until told to stop.

    Raises UsageError for a --command-config that cannot be used; CommandFailed when the
    broker cannot be reached, refuses the authentication, or answers with an error (a
    topic that does not exist, a partition it does not have).
    """
    security = command_security(arguments.command_config)
    topic = arguments.topic + (FULL_VIEW_SUFFIX if arguments.full else "")
    try:
        with record_connection(
            arguments.bootstrap, security, CLIENT_ID, READ_TIMEOUT_S, "read", ReadError
        ) as connection:
            reader = TopicReader(connection, topic)
            _place(reader, _partitions(reader, arguments.partition), arguments.from_beginning)
            _follow(reader, arguments)
    except (KeyboardInterrupt, OutputClosed):
        return  # Ctrl-C ends following; a closed pipe wants no more


def _partitions(reader: TopicReader, named: int | None) -> list[int]:
    partitions = reader.partitions()
    if named is None:
        return partitions
    if named not in partitions:
        raise ReadError(f"topic {reader.topic} has no partition {named}")
    return [named]


def _place(reader: TopicReader, partitions: list[int], from_beginning: bool) -> None:
    """Sets each partition's position to its log start or its end, as a new consumer's
    auto.offset.reset does (earliest with --from-beginning, latest otherwise)."""
    reader.positions.update(reader.offsets(partitions, EARLIEST if from_beginning else LATEST))


def _follow(reader: TopicReader, arguments: argparse.Namespace) -> None:
    """Fetches and prints until --max-records were printed or --timeout-ms passed without
    a record; a partition whose position retention removed is placed again."""
    left = arguments.max_records
    timeout_s = None if arguments.timeout_ms is None else arguments.timeout_ms / 1000
    quiet_since = time.monotonic()
    while left is None or left > 0:
        wait_ms = FETCH_WAIT_MS
        if timeout_s is not None:
            remaining_s = timeout_s - (time.monotonic() - quiet_since)
            wait_ms = max(0, min(FETCH_WAIT_MS, round(remaining_s * 1000)))
        records, out_of_range = reader.fetch(wait_ms)
        _place(reader, out_of_range, arguments.from_beginning)
        shown = records if left is None else records[:left]
        _print(shown, arguments.json)
        if left is not None:
            left -= len(shown)
        if records:
            quiet_since = time.monotonic()
        elif timeout_s is not None and time.monotonic() - quiet_since >= timeout_s:
            return


def _print(records: list[ReadRecord], as_json: bool) -> None:
    """Prints the records at once (whoever reads a pipe sees them as they come); raises
    OutputClosed when that reader has gone, after which nothing more may reach stdout."""
    if not records:
        return
    lines = [
        json.dumps(record_json(record)) if as_json else record_line(record) for record in records
    ]
    print_lines("\n".join(lines))


def record_line(record: ReadRecord) -> str:
    headers = ",".join(
        f"{name.translate(ESCAPES)}:{shown_text(value)}" for name, value in record.headers
    )
    return "\t".join(
        (
            f"offset={record.offset}",
            f"partition={record.partition}",
            f"timestamp={shown_time(record.timestamp)}",
            f"key={shown_text(record.key)}",
            f"value={shown_text(record.value)}",
            f"headers={headers}",
        )
    )


def shown_text(data: bytes | None) -> str:
    """UTF-8 as text with its control characters escaped, other bytes as 0x and hex,
    none as ``null``."""
    if data is None:
        return "null"
    try:
        return data.decode("utf-8").translate(ESCAPES)
    except UnicodeDecodeError:
        return "0x" + data.hex()


def shown_time(timestamp_ms: int) -> str:
    """An ISO 8601 UTC time to the millisecond; ``-`` for none (-1)."""
    if timestamp_ms < 0:
        return "-"
    try:
        moment = datetime.datetime.fromtimestamp(timestamp_ms / 1000, datetime.UTC)
    except (OverflowError, ValueError, OSError):
        return str(timestamp_ms)  # past year 9999
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def record_json(record: ReadRecord) -> dict[str, object]:
    return {
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key": json_bytes(record.key),
        "value": json_bytes(record.value),
        "headers": [{"key": name, "value": json_bytes(value)} for name, value in record.headers],
    }


def json_bytes(data: bytes | None) -> object:
    """UTF-8 as a JSON string, other bytes as ``{"base64": ...}``, none as null."""
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}

"""``kshim transactions``: list, describe and find hanging transactions of a running broker
(kshim or any Kafka broker of 3.0 or later), as Kafka's kafka-transactions.sh does, and
abort one where the broker lets a client do that.

Lists and descriptions print as aligned tables; ``--json`` prints one JSON object per
line instead. ``--command-config`` takes a Kafka client properties file (security.protocol, TLS and
SASL settings), as ``kshim topics`` does.

**Hanging**, as kafka-transactions.sh find-hanging defines it (KIP-664): a transaction
open on a partition that its coordinator will never end there. A producer's transaction
on a partition is reported when all three hold:

1. the partition's leader has it open: DescribeProducers gives the producer a
   current_txn_start_offset of 0 or more;
2. it is older than ``--max-transaction-timeout`` (minutes, default 15, Kafka's default
   transaction.max.timeout.ms): now minus the producer's last_timestamp (the max
   timestamp of its last batch there, not the transaction's start) is more than that;
3. its coordinator will not write its marker there: no broker lists a transactional id
   for the producer id (ListTransactions filtered by producer id), or the coordinator
   does not know that id (DescribeTransactions: TRANSACTIONAL_ID_NOT_FOUND), or the
   transaction the coordinator describes for it does not include this partition (the
   producer has moved on, or its transaction ended without a marker here).

So an open transaction that its coordinator still lists with the partition is not
hanging however old it is, since the coordinator still owes it a marker (Kafka aborts it
at its timeout; kshim reviews it, docs/transactions.md), and a transaction
is judged by the producer's last write, so one still being written to is not a candidate.
``--max-transaction-timeout`` takes fractional minutes (Kafka's takes whole ones).

``abort`` writes an ABORT marker for one partition's open transaction with
WriteTxnMarkers, as Kafka's tool does (named by ``--start-offset``, or by
``--producer-id``, ``--producer-epoch`` and ``--coordinator-epoch``). It first asks the
partition's leader (ApiVersions) whether it serves WriteTxnMarkers; kshim does not, since
its coordinator decides an overdue transaction by its review, so against kshim the
command fails saying so, and changes nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable, Iterator

from kshim.cli.admin_options import Commands, add_admin_command, run_subcommand
from kshim.cli.argument_types import add_list_option
from kshim.cli.errors import OneLineArgumentParser, UsageError
from kshim.cli.text_table import fixed_width_table, json_or_table
from kshim.client.hanging_transactions import OpenTransaction, hanging_transactions
from kshim.client.request_versions import WRITE_TXN_MARKERS
from kshim.client.topic_admin import AdminError
from kshim.client.transaction_admin import (
    BrokerLacksApi,
    PartitionLeader,
    TransactionAdmin,
    TransactionListing,
    transaction_admin,
)
from kshim.client.transaction_descriptions import ProducerState, TransactionDescription

TRANSACTIONS_PROGRAM = "kshim transactions"
DEFAULT_MAX_TIMEOUT_MINUTES = 15.0
MINUTE_MS = 60_000
NO_VALUE = "-"
# Kafka's TransactionState names, which ListTransactions filters by.
STATES = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
)
LACKS_ABORT = (
    "; kshim ends an overdue transaction by its review (kshim.review.hook), "
    "not by a client's marker"
)


def add_transactions_parser(commands: Commands) -> None:
    """Adds ``transactions`` and its subcommands to the ``kshim`` parser's ``commands``."""
    transactions_help = "transactions: list, describe, find-hanging, abort"
    add = add_admin_command(
        commands, "transactions", transactions_help, TRANSACTIONS_PROGRAM, SUBCOMMANDS
    )
    _add_list(add("list", "transactional ids: coordinator, state, producer id"))
    add("describe", "one transactional id's transaction").add_argument(
        "--transactional-id", required=True
    )
    _add_find_hanging(add("find-hanging", "open transactions no coordinator will end"))
    _add_abort(add("abort", "abort a hanging transaction (brokers serving WriteTxnMarkers)"))


def _add_list(list_parser: OneLineArgumentParser) -> None:
    states_help = f"only these states: {', '.join(STATES)}"
    add_list_option(list_parser, "--state", "STATE", states_help, state_name)
    add_list_option(list_parser, "--producer-id", "ID", "only these producer ids", int)


def _add_find_hanging(find: OneLineArgumentParser) -> None:
    find.add_argument("--topic", required=True)
    find.add_argument("--partition", type=int, help="only this partition (default: every one)")
    find.add_argument(
        "--max-transaction-timeout",
        type=minutes,
        default=DEFAULT_MAX_TIMEOUT_MINUTES,
        metavar="MINUTES",
        help="only transactions older than this, in minutes (default 15; fractions allowed)",
    )


def _add_abort(abort: OneLineArgumentParser) -> None:
    abort.add_argument("--topic", required=True)
    abort.add_argument("--partition", type=int, required=True)
    abort.add_argument("--start-offset", type=int, help="where the transaction to abort starts")
    abort.add_argument("--producer-id", type=int, help="or the producer id, with the two below")
    abort.add_argument("--producer-epoch", type=int)
    abort.add_argument("--coordinator-epoch", type=int)


def state_name(text: str) -> str:
    """argparse type of --state: Kafka's name of the state, whatever its case."""
    for state in STATES:
        if state.lower() == text.lower():
            return state
    raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(STATES)}")


def minutes(text: str) -> float:
    """argparse type of --max-transaction-timeout: a finite number of minutes, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of minutes (0 or more)")
    return value


def run_transactions(arguments: argparse.Namespace) -> None:
    """Runs one ``kshim transactions`` subcommand and prints its result.

    Raises UsageError for a --command-config that cannot be used, or an
    abort that does not name one transaction; CommandFailed when the broker cannot be
    reached, answers with an error, or does not serve what the command needs.
    """
    if arguments.transactions_command == "abort":
        check_abort_target(arguments)
    subcommand = SUBCOMMANDS[arguments.transactions_command]
    run_subcommand(arguments.bootstrap, transaction_admin, subcommand, arguments, (AdminError,))


def check_abort_target(arguments: argparse.Namespace) -> None:
    """Raises UsageError unless abort names its transaction one way: --start-offset, or
    --producer-id with --producer-epoch and --coordinator-epoch."""
    by_producer = (arguments.producer_id, arguments.producer_epoch, arguments.coordinator_epoch)
    if arguments.start_offset is not None:
        if any(value is not None for value in by_producer):
            raise UsageError("abort takes --start-offset or --producer-id, not both")
    elif arguments.producer_id is None:
        raise UsageError(
            "abort needs --start-offset, or --producer-id with --producer-epoch and "
            "--coordinator-epoch"
        )
    elif None in by_producer:
        raise UsageError("--producer-id needs --producer-epoch and --coordinator-epoch")


def _list(admin: TransactionAdmin, arguments: argparse.Namespace) -> Iterator[str]:
    listings = admin.list_transactions(arguments.state, arguments.producer_id)
    yield from json_or_table(listings, arguments.json, listing_table)


def _describe(admin: TransactionAdmin, arguments: argparse.Namespace) -> Iterator[str]:
    description = admin.describe_transaction(arguments.transactional_id)
    now_ms = wall_clock_ms()
    if arguments.json:
        yield json.dumps(description_json(description, now_ms))
    else:
        yield description_table(description, now_ms)


def _find_hanging(admin: TransactionAdmin, arguments: argparse.Namespace) -> Iterator[str]:
    topic = arguments.topic
    leaders = admin.partition_leaders(topic, arguments.partition)
    producers = admin.describe_producers(topic, leaders)
    now_ms = wall_clock_ms()
    max_timeout_ms = arguments.max_transaction_timeout * MINUTE_MS
    found = hanging_transactions(admin, topic, producers, now_ms, max_timeout_ms)
    if arguments.json:
        yield from (json.dumps(transaction.to_json(now_ms)) for transaction in found)
    else:
        yield hanging_table(found, now_ms)


def _abort(admin: TransactionAdmin, arguments: argparse.Namespace) -> Iterator[str]:
    topic, partition = arguments.topic, arguments.partition
    where = f"{topic}-{partition}"
    [leader] = admin.partition_leaders(topic, partition)
    try:
        admin.check_serves(topic, leader, WRITE_TXN_MARKERS, "WriteTxnMarkers")
    except BrokerLacksApi as error:
        raise AdminError(f"cannot abort a transaction on {where}: {error}{LACKS_ABORT}") from error
    if arguments.start_offset is not None:
        producer = _producer_at(admin, topic, leader, arguments.start_offset)
        producer_id, epoch, coordinator_epoch = (
            producer.producer_id,
            producer.producer_epoch,
            producer.coordinator_epoch,
        )
    else:
        producer_id = arguments.producer_id
        epoch, coordinator_epoch = arguments.producer_epoch, arguments.coordinator_epoch
    # As Kafka's tool: a producer that never finished a transaction has coordinator epoch
    # -1, and 0 is no more than any epoch the coordinator could have.
    coordinator_epoch = max(coordinator_epoch, 0)
    admin.write_abort_marker(topic, leader, producer_id, epoch, coordinator_epoch)
    if arguments.json:
        aborted = {
            "topic": topic,
            "partition": partition,
            "producer_id": producer_id,
            "producer_epoch": epoch,
            "coordinator_epoch": coordinator_epoch,
            "aborted": True,
        }
        yield json.dumps(aborted)
    else:
        yield f"aborted the transaction of producer {producer_id} (epoch {epoch}) on {where}"


def _producer_at(
    admin: TransactionAdmin, topic: str, leader: PartitionLeader, start_offset: int
) -> ProducerState:
    """The producer whose transaction open on the partition starts at ``start_offset``."""
    producers = admin.describe_producers(topic, [leader]).get(leader.partition, [])
    for producer in producers:
        if producer.transaction_start_offset == start_offset:
            return producer
    raise AdminError(
        f"no open transaction starts at offset {start_offset} on {topic}-{leader.partition}"
    )


SUBCOMMANDS: dict[str, Callable[[TransactionAdmin, argparse.Namespace], Iterator[str]]] = {
    "list": _list,
    "describe": _describe,
    "find-hanging": _find_hanging,
    "abort": _abort,
}


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


def listing_table(listings: list[TransactionListing]) -> str:
    rows = [
        (
            listing.transactional_id,
            str(listing.coordinator),
            str(listing.producer_id),
            listing.state,
        )
        for listing in listings
    ]
    header = ("TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "STATE")
    return fixed_width_table(header, rows, left_aligned={0, 3})


def description_json(description: TransactionDescription, now_ms: int) -> dict[str, object]:
    """The description, with the transaction's age (duration_ms) when it has a start time
    (None, as the start, when it has none)."""
    start = description.start_time_ms
    return {
        "coordinator": description.coordinator,
        "transactional_id": description.transactional_id,
        "producer_id": description.producer_id,
        "producer_epoch": description.producer_epoch,
        "state": description.state,
        "timeout_ms": description.timeout_ms,
        "start_time_ms": start,
        "duration_ms": None if start is None else now_ms - start,
        "partitions": [
            {"topic": topic, "partition": partition} for topic, partition in description.partitions
        ],
    }


def description_table(description: TransactionDescription, now_ms: int) -> str:
    """One row, as Kafka's tool prints it: partitions as ``topic-partition``, comma-joined
    (``-`` for none), and ``-`` for the start time and age of no transaction."""
    start = description.start_time_ms
    row = (
        str(description.coordinator),
        description.transactional_id,
        str(description.producer_id),
        str(description.producer_epoch),
        description.state,
        str(description.timeout_ms),
        NO_VALUE if start is None else str(start),
        NO_VALUE if start is None else str(now_ms - start),
        ",".join(f"{topic}-{partition}" for topic, partition in description.partitions) or NO_VALUE,
    )
    header = (
        "COORDINATOR",
        "TRANSACTIONAL-ID",
        "PRODUCER-ID",
        "PRODUCER-EPOCH",
        "STATE",
        "TIMEOUT-MS",
        "START-TIME-MS",
        "DURATION-MS",
        "TOPIC-PARTITIONS",
    )
    return fixed_width_table(header, [row], left_aligned={1, 4, 8})


def hanging_table(found: list[OpenTransaction], now_ms: int) -> str:
    """One row per hanging transaction; its age in whole minutes since the producer's last
    write, as Kafka's tool prints it. Only the header when none was found."""
    rows = [
        (
            transaction.topic,
            str(transaction.partition),
            str(transaction.producer.producer_id),
            str(transaction.producer.producer_epoch),
            str(transaction.producer.coordinator_epoch),
            str(transaction.producer.transaction_start_offset),
            str(transaction.producer.last_timestamp),
            str((now_ms - transaction.producer.last_timestamp) // MINUTE_MS),
        )
        for transaction in found
    ]
    header = (
        "TOPIC",
        "PARTITION",
        "PRODUCER-ID",
        "PRODUCER-EPOCH",
        "COORDINATOR-EPOCH",
        "START-OFFSET",
        "LAST-TIMESTAMP",
        "DURATION-MIN",
    )
    return fixed_width_table(header, rows, left_aligned={0})

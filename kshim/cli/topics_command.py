"""``kshim topics``: list, describe, create, delete and reconfigure the topics of a running
broker (kshim or any Kafka broker), as Kafka's kafka-topics.sh and kafka-configs.sh do.

Lists and descriptions print as aligned tables, changes as one line; ``--json`` prints one
JSON object per line instead. ``--command-config`` takes the client properties file those
Kafka tools take: security.protocol, TLS and SASL settings (``kshim.client.security``);
any other setting but ``client.id`` is refused rather than silently ignored.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator

from kshim.cli.admin_options import Commands, add_admin_command, run_subcommand
from kshim.cli.argument_types import add_list_option
from kshim.cli.errors import OneLineArgumentParser, UsageError
from kshim.cli.text_table import fixed_width_table, json_or_table
from kshim.client.topic_admin import (
    BROKER_DEFAULT,
    AdminError,
    ConfigEntry,
    TopicAdmin,
    TopicDescription,
    TopicListing,
    topic_admin,
)

TOPICS_PROGRAM = "kshim topics"
NO_VALUE = "-"


def add_topics_parser(commands: Commands) -> None:
    """Adds ``topics`` and its subcommands to the ``kshim`` parser's ``commands``."""
    topics_help = "topics: list, describe, create, delete, configs"
    add = add_admin_command(commands, "topics", topics_help, TOPICS_PROGRAM, SUBCOMMANDS)
    add("list", "topic names, partition counts, internal or not")
    _add_describe(add("describe", "partitions, leaders, replicas, ISR and configs"))
    _add_create(add("create", "create a topic"))
    add("delete", "delete a topic").add_argument("--topic", required=True)
    _add_alter(add("alter-config", "set or delete configs of a topic"))


def _add_describe(describe: OneLineArgumentParser) -> None:
    describe.add_argument(
        "--topic", action="extend", nargs="+", help="only these topics (default: every topic)"
    )
    describe.add_argument(
        "--all-configs", action="store_true", help="every config, not only those set"
    )


def _add_create(create: OneLineArgumentParser) -> None:
    create.add_argument("--topic", required=True)
    create.add_argument(
        "--partitions", type=int, default=BROKER_DEFAULT, help="default: the broker's"
    )
    create.add_argument(
        "--replication-factor", type=int, default=BROKER_DEFAULT, help="default: the broker's"
    )
    add_list_option(create, "--config", "KEY=VALUE", value_type=config_pair)


def _add_alter(alter: OneLineArgumentParser) -> None:
    alter.add_argument("--topic", required=True)
    add_list_option(alter, "--add-config", "KEY=VALUE", "set these configs", config_pair)
    add_list_option(alter, "--delete-config", "KEY", "go back to the default of these")


def config_pair(text: str) -> tuple[str, str]:
    """argparse type of KEY=VALUE: (key, value), the value everything after the first ``=``."""
    key, equals, value = text.partition("=")
    if not key.strip() or not equals:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key.strip(), value


def run_topics(arguments: argparse.Namespace) -> None:
    """Runs one ``kshim topics`` subcommand and prints its result.

    Raises UsageError for a --command-config that cannot be used, or an alter-config that
    changes nothing or both sets and deletes a key; CommandFailed when the broker cannot be
    reached, refuses the authentication or answers with an error.
    """
    if arguments.topics_command == "alter-config":
        check_changes(arguments.add_config, arguments.delete_config)
    subcommand = SUBCOMMANDS[arguments.topics_command]
    run_subcommand(arguments.bootstrap, topic_admin, subcommand, arguments, (AdminError,))


def check_changes(add_configs: list[tuple[str, str]], delete_configs: list[str]) -> None:
    """Raises UsageError for an alter-config that changes nothing, or that both sets and
    deletes one key: Kafka refuses a key named twice in one request (INVALID_REQUEST,
    ConfigAdminManager.preprocess), so the command says so before asking."""
    if not (add_configs or delete_configs):
        raise UsageError("alter-config needs --add-config or --delete-config")
    both = sorted({key for key, _ in add_configs} & set(delete_configs))
    if both:
        raise UsageError(f"both added and deleted: {', '.join(both)}")


def _list(admin: TopicAdmin, arguments: argparse.Namespace) -> Iterator[str]:
    yield from json_or_table(admin.list_topics(), arguments.json, listing_table)


def _describe(admin: TopicAdmin, arguments: argparse.Namespace) -> Iterator[str]:
    descriptions = admin.describe_topics(arguments.topic, arguments.all_configs)
    if arguments.json:
        yield from (json.dumps(description.to_json()) for description in descriptions)
    else:
        yield partition_table(descriptions)
        yield ""
        yield config_table(descriptions)


def _create(admin: TopicAdmin, arguments: argparse.Namespace) -> Iterator[str]:
    created = admin.create_topic(
        arguments.topic, arguments.partitions, arguments.replication_factor, dict(arguments.config)
    )
    if arguments.json:
        yield json.dumps(created.to_json())
    else:
        yield (
            f"created topic {created.topic} ({created.partitions} partitions, "
            f"replication factor {created.replication_factor})"
        )


def _delete(admin: TopicAdmin, arguments: argparse.Namespace) -> Iterator[str]:
    admin.delete_topic(arguments.topic)
    if arguments.json:
        yield json.dumps({"topic": arguments.topic, "deleted": True})
    else:
        yield f"deleted topic {arguments.topic}"


def _alter(admin: TopicAdmin, arguments: argparse.Namespace) -> Iterator[str]:
    set_configs = dict(arguments.add_config)
    admin.alter_configs(arguments.topic, set_configs, arguments.delete_config)
    if arguments.json:
        change = {"topic": arguments.topic, "set": set_configs, "deleted": arguments.delete_config}
        yield json.dumps(change)
    else:
        yield f"altered configs of topic {arguments.topic}"


SUBCOMMANDS: dict[str, Callable[[TopicAdmin, argparse.Namespace], Iterator[str]]] = {
    "list": _list,
    "describe": _describe,
    "create": _create,
    "delete": _delete,
    "alter-config": _alter,
}


def listing_table(listings: list[TopicListing]) -> str:
    rows = [
        (listing.topic, str(listing.partitions), "yes" if listing.internal else "no")
        for listing in listings
    ]
    return fixed_width_table(("TOPIC", "PARTITIONS", "INTERNAL"), rows, left_aligned={0, 2})


def partition_table(descriptions: list[TopicDescription]) -> str:
    """One row per partition; replicas and ISR as comma-separated broker ids."""
    rows = [
        (
            description.topic,
            str(partition.partition),
            str(partition.leader),
            ",".join(map(str, partition.replicas)),
            ",".join(map(str, partition.isr)),
        )
        for description in descriptions
        for partition in description.partitions
    ]
    header = ("TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR")
    return fixed_width_table(header, rows, left_aligned={0, 3, 4})


def config_table(descriptions: list[TopicDescription]) -> str:
    """One row per config described, with where its value comes from (Kafka's names)."""
    rows = [
        (description.topic, entry.name, _shown_value(entry), entry.source)
        for description in descriptions
        for entry in description.configs
    ]
    header = ("TOPIC", "CONFIG", "VALUE", "SOURCE")
    return fixed_width_table(header, rows, left_aligned={0, 1, 2, 3})


def _shown_value(entry: ConfigEntry) -> str:
    """The value, ``-`` for none (a sensitive config's is never sent), and the empty
    string as ``""`` so that it does not read as a missing column."""
    if entry.value is None:
        return NO_VALUE
    return entry.value or '""'

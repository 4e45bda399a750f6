"""The ``kshim`` command line: parses arguments and calls library functions."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import signal
import sys
import time

from kshim.broker.broker import Broker
from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.config.keys import ConfigError, from_environment, parse_properties
from kshim.broker.groups.consumption_status import format_table
from kshim.broker.transactions.review_hooks import ReviewHookError, load_review_hook
from kshim.cli.event_loop import run_on
from kshim.cli.group_query import QueryError, query_status
from kshim.server.listener import KafkaServer
from kshim.storage.log_store import DiskLogStore

DEFAULT_LISTEN = "127.0.0.1:9092"
DEFAULT_DATA_DIR = "./kshim-data"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kshim", description="A Kafka-compatible broker.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run a single-node broker")
    serve.add_argument("--listen", help=f"host:port to listen on (default {DEFAULT_LISTEN})")
    serve.add_argument(
        "--data-dir", help=f"where logs and metadata live (default {DEFAULT_DATA_DIR})"
    )
    serve.add_argument(
        "--review-hook",
        help="decides overdue transactions: module:function or an http(s) URL (kshim.review.hook)",
    )
    serve.add_argument("--advertised", help="host:port clients are told to use (default: --listen)")
    serve.add_argument("--config", help="a Kafka-style properties file")
    serve.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="a config entry"
    )
    serve.add_argument("--log-level", default="INFO")
    groups = commands.add_parser("groups", help="consumer groups: committed offsets and lag")
    groups.add_argument("--bootstrap", default=DEFAULT_LISTEN, help="a running broker, host:port")
    groups.add_argument("--group", help="only this group (default: every group)")
    return parser


def show_groups(arguments: argparse.Namespace) -> int:
    """Prints the consumption status table of a running broker's groups."""
    try:
        rows = query_status(arguments.bootstrap, arguments.group)
    except (OSError, ValueError, QueryError) as error:
        print(f"kshim groups: {error}", file=sys.stderr)
        return 1
    print(format_table(rows))
    return 0


def load_config(arguments: argparse.Namespace, environment: dict[str, str]) -> BrokerConfig:
    """Merges defaults, the config file, environment, --set and the flags (later wins)."""
    layers: list[dict[str, str]] = []
    if arguments.config:
        with open(arguments.config, encoding="utf-8") as handle:
            layers.append(parse_properties(handle.read()))
    layers.append(from_environment(environment))
    layers.append(parse_properties("\n".join(arguments.set)))
    flags: dict[str, str] = {}
    if arguments.listen or "listeners" not in _merged_keys(layers):
        flags["listeners"] = f"PLAINTEXT://{arguments.listen or DEFAULT_LISTEN}"
    if arguments.data_dir or "log.dirs" not in _merged_keys(layers):
        flags["log.dirs"] = arguments.data_dir or DEFAULT_DATA_DIR
    if arguments.advertised:
        flags["advertised.listeners"] = f"PLAINTEXT://{arguments.advertised}"
    if arguments.review_hook:
        flags["kshim.review.hook"] = arguments.review_hook
    layers.append(flags)
    return BrokerConfig.load(layers)


def _merged_keys(layers: list[dict[str, str]]) -> set[str]:
    return {key for layer in layers for key in layer}


# Python's cyclic garbage collector, tuned for a broker. A request for thousands of partitions
# makes tens of objects per partition, nearly all freed by reference counting at once; at the
# default threshold (700 allocations) the collector ran during every such request and moved
# its objects into older generations, whose full collections then walked every topic's
# objects (140 ms at 10,000 topics). Collecting the youngest generation every 20,000
# allocations cut the in-process cost of a produce request for 2,000 one-record partitions
# by about a fifth; what is loaded at start-up lives as long as the broker and is moved out
# of the collector's way (gc.freeze).
GC_THRESHOLDS = (20_000, 10, 10)


async def serve(config: BrokerConfig) -> None:
    """Runs the broker until SIGINT or SIGTERM, then shuts down cleanly."""
    started = time.monotonic()
    gc.set_threshold(*GC_THRESHOLDS)
    server = KafkaServer(Broker(config))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signal_number in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signal_number, stop.set)
    host, port = await server.start()
    gc.freeze()
    print(f"kshim listening on {host}:{port}, data in {config.data_dir}", flush=True)
    await stop.wait()
    await server.stop()
    print(stopped_line(server.broker, time.monotonic() - started), file=sys.stderr, flush=True)


def stopped_line(broker: Broker, uptime_s: float) -> str:
    """What the log store did over the broker's life, said once at a clean shutdown."""
    logs = broker.logs
    if not isinstance(logs, DiskLogStore):
        return f"kshim stopped after {uptime_s:.1f} s"
    return (
        f"kshim stopped after {uptime_s:.1f} s: {logs.sync_count} fsyncs, "
        f"{logs.wal_bytes_written} bytes written to the write-ahead log"
    )


def main(argv: list[str] | None = None) -> int:
    arguments = build_parser().parse_args(argv)
    if arguments.command == "groups":
        return show_groups(arguments)
    logging.basicConfig(
        level=arguments.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        config = load_config(arguments, dict(os.environ))
        load_review_hook(config.values["kshim.review.hook"])  # fail at start, not at first review
    except (ConfigError, OSError, ReviewHookError) as error:
        print(f"kshim: configuration error: {error}", file=sys.stderr)
        return 2
    run_on(config.values["kshim.event.loop"], serve(config))
    return 0


if __name__ == "__main__":
    sys.exit(main())

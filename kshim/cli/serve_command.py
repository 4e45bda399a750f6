"""``kshim serve``: runs the broker until SIGINT or SIGTERM.

The ``kshim`` command runs ``serve`` through this module alone (kshim/launcher.py): a
broker runs for months, and the modules of the admin commands (clients of a broker) would
only add to its memory and its start-up.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import os
import signal
import sys
import time

from kshim.broker.broker import Broker
from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.config.validators import ConfigError
from kshim.broker.security.principal_mapping import MappingRuleError
from kshim.broker.transactions.review_hooks import ReviewHookError, load_review_hook
from kshim.cli.allocator import hold_heap_while_busy, malloc_trim, trim_when_idle
from kshim.cli.config_sources import (
    DEFAULT_DATA_DIR,
    DEFAULT_LISTEN,
    listener_argument,
    load_config,
)
from kshim.cli.errors import (
    FAILURE_STATUS,
    PROGRAM,
    USAGE_STATUS,
    CommandFailed,
    OneLineArgumentParser,
    UsageError,
    data_directory_problem,
    print_error,
)
from kshim.cli.event_loop import run_on, running_loop_name
from kshim.client.errors import reason
from kshim.server.descriptor_limit import raise_open_file_limit
from kshim.server.listener import KafkaServer, ListenError
from kshim.server.metrics.errors import MetricsUnavailable
from kshim.server.security.tls import TlsConfigError
from kshim.storage.files.data_directory_lock import DataDirectoryInUse
from kshim.storage.log.log_store import DiskLogStore

log = logging.getLogger(__name__)
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
SERVE_HELP = "run a single-node broker"
# The alarm said when the log store fails a write, and how long the broker goes on
# answering (produces with KAFKA_STORAGE_ERROR) before it stops.
STORAGE_FAILED = "storage_failed"
FAILURE_GRACE_S = 1.0


def add_serve_parser(commands: argparse._SubParsersAction[OneLineArgumentParser]) -> None:
    """``serve`` among the ``kshim`` command's subcommands."""
    add_serve_arguments(commands.add_parser("serve", help=SERVE_HELP))


def add_serve_arguments(serve: argparse.ArgumentParser) -> None:
    """The options of ``kshim serve``."""
    serve.add_argument(
        "--listen",
        type=listener_argument,
        help=f"host:port to listen on, port 0 for any free one (default {DEFAULT_LISTEN})",
    )
    serve.add_argument(
        "--data-dir", help=f"where logs and metadata live (default {DEFAULT_DATA_DIR})"
    )
    serve.add_argument(
        "--review-hook",
        help="decides overdue transactions: module:function or an http(s) URL (kshim.review.hook)",
    )
    serve.add_argument(
        "--advertised",
        type=listener_argument,
        help="host:port clients are told to use (default: --listen)",
    )
    serve.add_argument("--config", help="a Kafka-style properties file")
    serve.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="a config entry"
    )
    serve.add_argument(
        "--log-level", default="INFO", type=str.upper, choices=LOG_LEVELS, help="default INFO"
    )


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
    """Runs the broker until SIGINT or SIGTERM, then shuts down cleanly; raises
    CommandFailed when the data directory or the listening address cannot be used."""
    started = time.monotonic()
    gc.set_threshold(*GC_THRESHOLDS)
    hold_heap_while_busy()  # before start-up allocates: kshim/cli/allocator.py
    stop = _stop_on_signals()
    # The whole process's limit, so raised here and not by an embedded KafkaServer.
    raise_open_file_limit()
    server, (host, port) = await _start(config)
    gc.freeze()
    for line in listening_lines(server, config, (host, port)):
        print(line, flush=True)
    # Said once started, so that a start that fails prints nothing but its error line.
    log.info("event loop: %s", running_loop_name())
    trim = malloc_trim()
    trimming = asyncio.create_task(trim_when_idle(trim)) if trim is not None else None
    failure = await _until_stopped(stop, server.broker)
    if trimming is not None:
        trimming.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await trimming
    await server.stop()
    print(stopped_line(server.broker, time.monotonic() - started), file=sys.stderr, flush=True)
    if failure is not None:
        raise CommandFailed(storage_failure_line(failure))


async def _until_stopped(stop: asyncio.Event, broker: Broker) -> BaseException | None:
    """Waits for a signal or for the log store to fail a write; returns that failure.

    A failed write stops the broker, as Kafka halts a broker whose every log directory
    has failed (LogDirFailureChannel, ReplicaManager.handleLogDirFailure): what the
    store holds in memory may no longer match the disk, and only recovery at the next
    start knows what is durable. Until it stops, every produce is answered with
    KAFKA_STORAGE_ERROR, which clients retry; for FAILURE_GRACE_S the answers already
    decided reach their clients, then the process exits with one line saying why."""
    signalled = asyncio.create_task(stop.wait())
    failed = asyncio.create_task(broker.logs.write_failed())
    await asyncio.wait({signalled, failed}, return_when=asyncio.FIRST_COMPLETED)
    signalled.cancel()
    if not failed.done():
        failed.cancel()
        return None
    error = failed.result()
    broker.alarms.happened(
        STORAGE_FAILED, broker.config.data_dir, 1, 0, storage_failure_line(error)
    )
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), FAILURE_GRACE_S)
    if broker.webhook is not None:  # the alarm reaches its receiver before the broker stops
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(broker.webhook.drained(), broker.webhook.settings.timeout_s)
    return error


def storage_failure_line(error: BaseException) -> str:
    """The broker's last line after a failed write: why it stopped, what to do."""
    why = reason(error) if isinstance(error, OSError) else str(error)
    return (
        f"stopped: a write to the log failed ({why}); every acknowledged record "
        "is on disk and recovery keeps it: start kshim again once the disk has room or "
        "works again"
    )


def _stop_on_signals() -> asyncio.Event:
    """An event the first SIGINT or SIGTERM sets. Installed before the broker starts, so
    that a signal during start-up stops it cleanly once started, rather than killing it
    with its stores half open."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signal_number in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signal_number, stop.set)
    return stop


async def _start(config: BrokerConfig) -> tuple[KafkaServer, tuple[str, int]]:
    """The started server and its bound address; raises CommandFailed for an address that
    cannot be bound or a data directory that cannot be used (any other OSError of the
    broker's start-up: it reads and writes nothing else)."""
    try:
        server = KafkaServer(Broker(config), metrics_required=True)
        return server, await server.start()
    except ListenError as error:
        # asyncio's own message repeats the address; the errno's text says just the reason.
        raise CommandFailed(f"{error}: {reason(error.cause)}") from error
    except MetricsUnavailable as error:
        raise CommandFailed(f"{error}: {reason(error.cause)}{error.hint}") from error
    except (DataDirectoryInUse, TlsConfigError, MappingRuleError) as error:
        raise CommandFailed(str(error)) from error
    except OSError as error:
        raise CommandFailed(data_directory_problem(config.data_dir, error)) from error


def listening_lines(server: KafkaServer, config: BrokerConfig, first: tuple[str, int]) -> list[str]:
    """What ``kshim serve`` prints once it serves: the first listener's address and
    security protocol, the data directory and where metrics are, then a line for each
    other listener."""
    protocols = {listener.name: listener.security_protocol for listener in config.listeners()}
    names = list(server.bound)
    line = f"kshim listening on {first[0]}:{first[1]} ({protocols[names[0]]}), data in "
    line += config.data_dir
    if server.metrics is not None and server.metrics.address is not None:
        metrics_host, metrics_port = server.metrics.address
        line += f", metrics on http://{metrics_host}:{metrics_port}/metrics"
    lines = [line]
    for name in names[1:]:
        other_host, other_port = server.bound[name]
        lines.append(
            f"kshim listening on {name}://{other_host}:{other_port} ({protocols[name]}) too"
        )
    return lines


def stopped_line(broker: Broker, uptime_s: float) -> str:
    """What the log store did over the broker's life, said once at a clean shutdown."""
    logs = broker.logs
    if not isinstance(logs, DiskLogStore):
        return f"kshim stopped after {uptime_s:.1f} s"
    wal, direct = logs.wal_bytes_written, logs.segment_bytes_written_directly
    return (
        f"kshim stopped after {uptime_s:.1f} s: {logs.sync_count} fsyncs, {wal + direct} bytes "
        f"made durable ({wal} through the write-ahead log, {direct} straight to segment files)"
    )


def run_broker(arguments: argparse.Namespace) -> None:
    """``kshim serve``: raises UsageError for a bad configuration, CommandFailed when the
    broker cannot start."""
    logging.basicConfig(
        level=arguments.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        config = load_config(arguments, os.environ)
        load_review_hook(config.values["kshim.review.hook"])  # fail at start, not at first review
    except (ConfigError, ReviewHookError) as error:
        raise UsageError(str(error)) from error
    run_on(config.values["kshim.event.loop"], serve(config))


def main(argv: list[str]) -> int:
    """``kshim serve`` with the arguments after ``serve``; returns the exit status."""
    parser = OneLineArgumentParser(prog=f"{PROGRAM} serve", description=SERVE_HELP)
    add_serve_arguments(parser)
    arguments = parser.parse_args(argv)
    try:
        run_broker(arguments)
    except UsageError as error:
        print_error(str(error))
        return USAGE_STATUS
    except CommandFailed as error:
        print_error(str(error))
        return FAILURE_STATUS
    return 0

"""``python -m spark_examples.capture``: ship a source database's changes to a kshim topic.

    python -m spark_examples.capture --source URL --tables t1,t2 --bootstrap HOST:PORT \
        --topic T [--once] [--batch-size 1000] [--transaction-timeout-ms 60000] \
        [--kafka-config client.properties] [--kafka-option KEY=VALUE ...]

Runs until SIGTERM or SIGINT (the batch in flight is finished first), or with ``--once``
until the change log is drained. See shipper.py for what one batch does, and
spark_examples/kafka_security.py for the Kafka client settings of a broker that wants TLS
or SASL.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence

from spark_examples.capture.shipper import BATCH_SIZE, run_capture
from spark_examples.kafka_security import add_kafka_arguments, kafka_security, librdkafka_settings


def parse_arguments(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The options of the command line (argparse exits on a usage error, unusable Kafka
    client settings included); ``kafka_settings`` holds librdkafka's."""
    parser = argparse.ArgumentParser(
        prog="python -m spark_examples.capture", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--source", required=True, help="source database URL")
    parser.add_argument(
        "--tables",
        required=True,
        help="comma-separated table names, or * for every table with a primary key, new ones"
        " included",
    )
    parser.add_argument("--bootstrap", required=True, help="broker HOST:PORT")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--once", action="store_true", help="drain what is there, then exit")
    parser.add_argument("--batch-size", type=int, default=BATCH_SIZE)
    parser.add_argument("--transaction-timeout-ms", type=int, default=60_000)
    add_kafka_arguments(parser)
    arguments = parser.parse_args(argv)
    security = kafka_security(parser, arguments.kafka_config, arguments.kafka_option)
    arguments.kafka_settings = librdkafka_settings(security)
    return arguments


def _set_later(stop: threading.Event) -> None:
    """Sets ``stop`` from a thread of its own. A signal handler runs in the main thread,
    which may be inside ``stop.wait()`` holding the event's lock at that moment; setting the
    event right there takes the same lock again and deadlocks (seen: a SIGTERM that never
    stopped the capture)."""
    threading.Thread(target=stop.set, name="stop-on-signal", daemon=True).start()


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the capture as the command line says; returns the exit status (0)."""
    arguments = parse_arguments(argv)
    stop = threading.Event()
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signal_number, lambda *_: _set_later(stop))
    tables = [name.strip() for name in arguments.tables.split(",") if name.strip()]
    run_capture(
        arguments.source,
        tables,
        arguments.bootstrap,
        arguments.topic,
        arguments.once,
        stop,
        batch_size=arguments.batch_size,
        transaction_timeout_ms=arguments.transaction_timeout_ms,
        kafka_security=arguments.kafka_settings,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Runs one Kafka Connect 3.9 worker in distributed mode against a Kafka broker (kshim or
Apache Kafka).

    python -m examples.connect.run_connect --bootstrap 127.0.0.1:9092 --rest-port 8083 \\
        --work-dir ./connect [--group-id kshim-connect] [--exactly-once] [--no-schemas] \\
        [--set KEY=VALUE ...] [--print-command]

Takes the jars from kshim.jvm's cache (classpath.py: Maven fetches them first when they are
not there yet), writes ``WORK_DIR/worker.properties`` and ``WORK_DIR/log4j.properties``, then
replaces this process with the JVM: the process id stays the worker's, so a supervisor (or a
test) that signals it signals the worker. The worker logs to standard output. Start more
workers with the same ``--group-id`` (and their own ``--rest-port`` and ``--work-dir``) to
form a cluster. Exit status 1, with one line, when Java or a jar is missing; 2 on a usage
error.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from examples.connect.classpath import ClasspathError, worker_jars
from examples.connect.worker import (
    DEFAULT_GROUP_ID,
    WorkerSettings,
    java_executable,
    worker_command,
    write_worker_files,
)


def _setting(text: str) -> tuple[str, str]:
    key, separator, value = text.partition("=")
    if not separator or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key.strip(), value


def parse_arguments(argv: Sequence[str] | None) -> tuple[WorkerSettings, Path, bool]:
    """(the worker's settings, its work directory, whether only to print the command)."""
    parser = argparse.ArgumentParser(
        prog="python -m examples.connect.run_connect", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--bootstrap", required=True, help="HOST:PORT of the broker")
    parser.add_argument("--rest-port", type=int, default=8083, help="Connect's REST port")
    parser.add_argument("--rest-host", default="127.0.0.1", help="REST listener address")
    parser.add_argument("--work-dir", type=Path, required=True, help="its properties files")
    parser.add_argument("--group-id", default=DEFAULT_GROUP_ID, help="the Connect cluster")
    parser.add_argument(
        "--exactly-once", action="store_true", help="exactly.once.source.support=enabled"
    )
    parser.add_argument(
        "--no-schemas", action="store_true", help="JsonConverter schemas.enable=false"
    )
    parser.add_argument(
        "--set", type=_setting, action="append", default=[], metavar="KEY=VALUE",
        help="any worker property (repeatable; wins over the defaults)",
    )  # fmt: skip
    parser.add_argument("--print-command", action="store_true", help="print, do not run")
    arguments = parser.parse_args(argv)
    settings = WorkerSettings(
        bootstrap=arguments.bootstrap,
        rest_port=arguments.rest_port,
        rest_host=arguments.rest_host,
        group_id=arguments.group_id,
        schemas=not arguments.no_schemas,
        exactly_once=arguments.exactly_once,
        overrides=dict(arguments.set),
    )
    return settings, arguments.work_dir.resolve(), arguments.print_command


def main(argv: Sequence[str] | None = None) -> int:
    """Prepares the work directory and execs the worker; returns only on an error (1) or
    with ``--print-command`` (0)."""
    settings, work_dir, print_only = parse_arguments(argv)
    java = java_executable()
    if java is None:
        print("run_connect: error: no Java: install a Java 17 runtime or set JAVA_HOME",
              file=sys.stderr)  # fmt: skip
        return 1
    try:
        jars = worker_jars()
    except ClasspathError as error:
        print(f"run_connect: error: {error}", file=sys.stderr)
        return 1
    worker_properties, log4j_properties = write_worker_files(settings, work_dir)
    command = worker_command(java, jars, worker_properties, log4j_properties)
    if not print_only:
        sys.stdout.flush()
        os.execv(java, command)  # replaces this process: never returns
    print(" ".join(command))
    return 0


if __name__ == "__main__":
    sys.exit(main())

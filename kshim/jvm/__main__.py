"""``python -m kshim.jvm``: fetch the pinned JVM jars, show where they are, run Apache Kafka.

    python -m kshim.jvm fetch [SET ...]        # every set when none is named; prints each
    python -m kshim.jvm list                   # the sets, whether each is cached, and where
    python -m kshim.jvm classpath SET          # the set's jars as a -cp argument
    python -m kshim.jvm kafka --port P --data-dir DIR [--jars kafka4] [--set KEY=VALUE ...]
                              [--listener PROTOCOL=PORT ...]

A failure is one line on stderr (``jvm: error: ...``) and exit status 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from kshim.jvm import kafka_server
from kshim.jvm.artifacts import (
    ARTIFACT_SETS,
    JvmArtifactsError,
    cached_jars,
    classpath,
    resolve,
    set_directory,
)

# Kafka's security protocols other than the PLAINTEXT listener every broker here has.
LISTENER_PROTOCOLS = ("SSL", "SASL_PLAINTEXT", "SASL_SSL")


def parser() -> argparse.ArgumentParser:
    command = argparse.ArgumentParser(
        prog="python -m kshim.jvm", description=(__doc__ or "").split("\n\n", 1)[0]
    )
    actions = command.add_subparsers(dest="action", required=True)
    fetch = actions.add_parser("fetch", help="resolve sets into the cache (all by default)")
    fetch.add_argument("sets", nargs="*", metavar="SET", help=f"of {', '.join(ARTIFACT_SETS)}")
    actions.add_parser("list", help="the sets, cached or not, and their directories")
    path = actions.add_parser("classpath", help="print a set's jars as a -cp argument")
    path.add_argument("set", choices=list(ARTIFACT_SETS), metavar="SET")
    kafka = actions.add_parser("kafka", help="run Apache Kafka as a single-node KRaft broker")
    kafka.add_argument("--port", type=int, required=True, help="the PLAINTEXT listener's port")
    kafka.add_argument("--data-dir", type=Path, required=True, help="configuration and logs")
    kafka.add_argument("--jars", default="kafka", choices=["kafka", "kafka4"])
    kafka.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="a broker setting"
    )
    kafka.add_argument(
        "--listener",
        action="append",
        default=[],
        metavar="PROTOCOL=PORT",
        help="another listener, e.g. SASL_SSL=9093 (its TLS and SASL settings with --set)",
    )
    return command


def listeners(entries: Sequence[str]) -> dict[str, int]:
    chosen = {}
    for entry in entries:
        name, _, port = entry.partition("=")
        if name.strip().upper() not in LISTENER_PROTOCOLS or not port.strip().isdigit():
            raise JvmArtifactsError(
                f"--listener takes PROTOCOL=PORT with PROTOCOL one of "
                f"{', '.join(LISTENER_PROTOCOLS)}, not {entry!r}"
            )
        chosen[name.strip().upper()] = int(port)
    return chosen


def settings(entries: Sequence[str]) -> dict[str, str]:
    chosen = {}
    for entry in entries:
        key, separator, value = entry.partition("=")
        if not separator or not key.strip():
            raise JvmArtifactsError(f"--set takes KEY=VALUE, not {entry!r}")
        chosen[key.strip()] = value.strip()
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    arguments = parser().parse_args(argv)
    try:
        if arguments.action == "fetch":
            for name in arguments.sets or ARTIFACT_SETS:
                jars = resolve(name)
                print(f"{name}: {len(jars)} jars in {set_directory(name)}", flush=True)
        elif arguments.action == "list":
            for name, chosen in ARTIFACT_SETS.items():
                state = "cached" if cached_jars(name) is not None else "not fetched"
                print(f"{name}\t{state}\t{set_directory(name)}\t{chosen.summary}")
        elif arguments.action == "classpath":
            print(classpath(arguments.set))
        else:
            overrides = settings(arguments.set)
            extra = listeners(arguments.listener)
            return kafka_server.run(
                arguments.port, arguments.data_dir, arguments.jars, overrides, extra
            )
    except JvmArtifactsError as error:
        print(f"jvm: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

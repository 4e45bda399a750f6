"""Broker CPU and rate for acks=all Produce requests, one at a time and pipelined.

    python -m benchmarks.pipelined_produce [--requests N] [--repeats N]

A raw client sends the same Produce request (v9, one 89-record batch of ~16 KB,
about what kafka-python's producer sends in the VENUS test) over one connection,
either waiting for each answer or keeping 5 in flight (kafka-python's and the
Java client's max.in.flight). Reports requests/s and the broker's user and system
CPU per request for kshim and Tansu; writes
benchmarks/results/pipelined_produce.json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from benchmarks.brokers import RunningBroker, running
from benchmarks.samples import Samples, add_samples, median_rows
from benchmarks.workloads import create_topic
from kshim.client.frames import encode_request
from kshim.client.wire import WireConnection, connect
from kshim.protocol.records import Record, build_batch

PRODUCE_KEY, PRODUCE_VERSION = 0, 9
DEPTHS = (1, 5)
RESULTS = Path(__file__).parent / "results" / "pipelined_produce.json"


def produce_frame(topic: str, records: int = 89, value_bytes: int = 170) -> bytes:
    """One size-prefixed acks=all Produce request of one plain (non-idempotent) batch, so
    the same bytes can be sent again and again."""
    batch = [Record(i, 1_700_000_000_000, b"k%d" % i, b"v" * value_bytes) for i in range(records)]
    fields = {"transactional_id": None, "acks": -1, "timeout": 30_000,
              "topic_data": [{"name": topic, "partition_data": [
                  {"index": 0, "records": build_batch(batch)}]}]}  # fmt: skip
    return encode_request(PRODUCE_KEY, PRODUCE_VERSION, 1, fields)


def run(broker: RunningBroker, frame: bytes, requests: int, depth: int) -> dict[str, float]:
    with connect(broker.bootstrap, timeout_s=30) as connection:
        user, system = broker.user_and_system_seconds()
        elapsed = pipelined(connection, frame, requests, depth)
        user_after, system_after = broker.user_and_system_seconds()
    return {
        "requests_per_s": requests / elapsed,
        "user_us_per_request": (user_after - user) / requests * 1e6,
        "system_us_per_request": (system_after - system) / requests * 1e6,
    }


def pipelined(connection: WireConnection, frame: bytes, requests: int, depth: int) -> float:
    """Sends ``frame`` ``requests`` times with ``depth`` answers awaited at once; returns
    the seconds taken, every answer read."""
    started = time.perf_counter()
    for _ in range(depth):
        connection.send(frame)
    for sent in range(depth, requests + depth):
        connection.read_frame()
        if sent < requests:
            connection.send(frame)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=3)
    arguments = parser.parse_args()
    frame = produce_frame("pipelined")
    found: Samples = {}
    for _ in range(arguments.repeats):
        for name in ("kshim", "tansu"):
            with running(name) as broker:
                create_topic(broker, "pipelined")
                for depth in DEPTHS:
                    result = run(broker, frame, arguments.requests, depth)
                    add_samples(found, name, f"depth {depth}", result)
    print("| broker | in flight | requests/s | user µs/request | system µs/request |")
    print("|---|---|---|---|---|")
    for name, label, (rate, user, system) in median_rows(found):
        print(f"| {name} | {label.split()[1]} | {rate:,.0f} | {user:.0f} | {system:.0f} |")
    RESULTS.write_text(json.dumps({"requests": arguments.requests, "results": found}, indent=1))


if __name__ == "__main__":
    main()

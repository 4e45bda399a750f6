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
import socket
import statistics
import struct
import time
from pathlib import Path

from benchmarks.brokers import RunningBroker, running
from benchmarks.workloads import create_topic
from kshim.protocol import codec
from kshim.protocol.records import Record, build_batch

PRODUCE_KEY, PRODUCE_VERSION = 0, 9
DEPTHS = (1, 5)
RESULTS = Path(__file__).parent / "results" / "pipelined_produce.json"
_SIZE = struct.Struct(">i")


def produce_frame(topic: str) -> bytes:
    """One size-prefixed acks=all Produce request of one plain (non-idempotent) batch, so
    the same bytes can be sent again and again."""
    records = [Record(i, 1_700_000_000_000, b"k%d" % i, b"v" * 170) for i in range(89)]
    request_class = codec.request_class(PRODUCE_KEY, PRODUCE_VERSION)
    fields = {"transactional_id": None, "acks": -1, "timeout": 30_000,
              "topic_data": [{"name": topic, "partition_data": [
                  {"index": 0, "records": build_batch(records)}]}]}  # fmt: skip
    body = codec.encode_entity(request_class, codec.build(request_class, fields))
    client_id = b"bench"
    header = struct.pack(">hhih", PRODUCE_KEY, PRODUCE_VERSION, 1, len(client_id)) + client_id
    flexible = codec.is_flexible(PRODUCE_KEY, PRODUCE_VERSION)
    message = header + (b"\x00" if flexible else b"") + body
    return _SIZE.pack(len(message)) + message


def cpu_split(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of one process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / 100, int(fields[12]) / 100


def run(broker: RunningBroker, frame: bytes, requests: int, depth: int) -> dict[str, float]:
    host, port = broker.bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=30) as connection:
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        user, system = cpu_split(broker.pid)
        started = time.perf_counter()
        for _ in range(depth):
            connection.sendall(frame)
        for sent in range(depth, requests + depth):
            _read_frame(connection)
            if sent < requests:
                connection.sendall(frame)
        elapsed = time.perf_counter() - started
        user_after, system_after = cpu_split(broker.pid)
    return {
        "requests_per_s": requests / elapsed,
        "user_us_per_request": (user_after - user) / requests * 1e6,
        "system_us_per_request": (system_after - system) / requests * 1e6,
    }


def _read_frame(connection: socket.socket) -> bytes:
    size = _SIZE.unpack(_read_exactly(connection, 4))[0]
    return _read_exactly(connection, size)


def _read_exactly(connection: socket.socket, count: int) -> bytes:
    data = bytearray()
    while len(data) < count:
        chunk = connection.recv(count - len(data))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return bytes(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=3)
    arguments = parser.parse_args()
    frame = produce_frame("pipelined")
    found: dict[str, dict[str, dict[str, list[float]]]] = {}
    for _ in range(arguments.repeats):
        for name in ("kshim", "tansu"):
            with running(name) as broker:
                create_topic(broker, "pipelined")
                for depth in DEPTHS:
                    result = run(broker, frame, arguments.requests, depth)
                    slot = found.setdefault(name, {}).setdefault(f"depth {depth}", {})
                    for metric, value in result.items():
                        slot.setdefault(metric, []).append(value)
    print("| broker | in flight | requests/s | user µs/request | system µs/request |")
    print("|---|---|---|---|---|")
    for name, by_depth in found.items():
        for label, metrics in by_depth.items():
            rate, user, system = (statistics.median(metrics[key]) for key in metrics)
            print(f"| {name} | {label.split()[1]} | {rate:,.0f} | {user:.0f} | {system:.0f} |")
    RESULTS.write_text(json.dumps({"requests": arguments.requests, "results": found}, indent=1))


if __name__ == "__main__":
    main()

"""What reading a Produce's topic names costs the gateway per request (docs/gateway.md).

    python -m benchmarks.gateway_requests [--number 200000]

Every Produce through a gateway has its topic names read, so that one naming ``T.delay``
is checked before the cluster sees it (kshim/gateway/requests.py). This times
``requests.inspect`` (header, ``acks`` and names) against ``requests.read`` (header and
``acks``, what the relay read before) on the bytes the relay hands them: the first 256
bytes of a frame (splitter.PEEK_BYTES) for a one-topic Produce, the whole frame for one
naming several topics. Process time, the best of seven runs; prints one line per shape.
"""

from __future__ import annotations

import argparse
import functools
import time
import timeit
from collections.abc import Callable, Sequence

from kshim.client.frames import encode_request
from kshim.gateway import requests
from kshim.gateway.splitter import PEEK_BYTES
from kshim.protocol.records import Record, build_batch

RUNS = 7
RECORDS_PER_BATCH = 100
VALUE = b"x" * 100
TIMESTAMP_MS = 1_800_000_000_000


def _produce(topics: Sequence[tuple[str, int]], version: int) -> bytes:
    """A Produce's payload (no size) with ``partitions`` 10 KiB batches for each topic."""
    records = [Record(i, TIMESTAMP_MS, b"k%d" % i, VALUE) for i in range(RECORDS_PER_BATCH)]
    batch = build_batch(records)
    topic_data = [
        {"name": name, "partition_data": [{"index": i, "records": batch} for i in range(count)]}
        for name, count in topics
    ]
    body = {"transactional_id": None, "acks": -1, "timeout": 30_000, "topic_data": topic_data}
    return encode_request(0, version, 7, body, client_id="rdkafka")[4:]


def _shapes() -> dict[str, bytes]:
    three = [("orders", 2), ("payments", 2), ("events", 2)]
    return {
        "one topic, one partition (first bytes)": _produce([("orders", 1)], 9)[:PEEK_BYTES],
        "one topic, six partitions (first bytes)": _produce([("orders", 6)], 9)[:PEEK_BYTES],
        "three topics, two partitions each, v9 (whole)": _produce(three, 9),
        "three topics, two partitions each, v3 (whole)": _produce(three, 3),
    }


def _nanoseconds(call: Callable[[], object], number: int) -> float:
    runs = timeit.repeat(call, number=number, repeat=RUNS, timer=time.process_time)
    return min(runs) / number * 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--number", type=int, default=200_000)
    arguments = parser.parse_args()
    for name, payload in _shapes().items():
        before = _nanoseconds(functools.partial(requests.read, payload), arguments.number)
        after = _nanoseconds(functools.partial(requests.inspect, payload), arguments.number)
        print(
            f"{name}, {len(payload)} B: read {before:.0f} ns, inspect {after:.0f} ns "
            f"(+{after - before:.0f} ns)"
        )


if __name__ == "__main__":
    main()

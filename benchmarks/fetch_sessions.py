"""The Fetch handler's cost per request, sessionless and in an incremental fetch session
(KIP-227), with 1 and with 100 partitions: the handler called in process, no socket.

    python -m benchmarks.fetch_sessions [--requests N] [--repeats N] [--disk]

A broker over the in-memory log store (``--disk``: the disk store, whose reads are file
regions) holds a topic of P partitions, each with one batch of 10 records. Each request
reads all P partitions; an incremental request is also smaller to decode (measured apart). Cases:

- ``full idle``: a sessionless full fetch at the high watermark (nothing new), what every
  poll of an idle consumer costs without sessions;
- ``full data``: a sessionless full fetch from offset 0 (every partition answers its batch);
- ``incremental idle``: the same consumer inside a fetch session: a request naming no
  partition, answered with none (where sessions exist);
- ``incremental data``: inside a session, partition 0 named at fetch offset 0, so it
  answers its batch and the other partitions are left out.

Prints the least over the repeats of the mean CPU µs per request (the least: the run the
machine's other work disturbed least), the handler's (it reads, encodes and updates the
session) and, apart, decoding the request from its body. The
cases that need sessions are skipped against a broker that declines them (its answers
carry session id 0).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from kio.serial import entity_reader

from kshim.api.context import RequestContext
from kshim.api.records import fetch
from kshim.api.records import produce as produce_handler
from kshim.broker.broker import Broker
from kshim.broker.clock import wall_clock_ms
from kshim.broker.config.broker_config import BrokerConfig
from kshim.client.frames import encode_body
from kshim.protocol import codec
from kshim.protocol.headers import RequestHeader
from kshim.protocol.messages.fetch import FetchRequest
from kshim.protocol.messages.serial import decode_request
from kshim.protocol.produce_request import PartitionData, ProduceRequest, TopicData
from kshim.protocol.records import BatchSpec, Record, build_batch
from kshim.storage.log.memory_log import MemoryLogStore

FETCH, FETCH_VERSION = 1, 12
PRODUCE_VERSION = 9
TOPIC = "sessions"
RECORDS = 10
NO_SESSION, NEW_SESSION_EPOCH, FINAL_EPOCH = 0, 0, -1


def fetch_body(
    partitions: list[int], offset: int, session_id: int, epoch: int, forgotten: Sequence[int] = ()
) -> bytes:
    fields: dict[str, Any] = {
        "replica_id": -1,
        "max_wait": 0,
        "min_bytes": 1,
        "max_bytes": 50 << 20,
        "isolation_level": 0,
        "session_id": session_id,
        "session_epoch": epoch,
        "topics": [
            {
                "topic": TOPIC,
                "partitions": [
                    {"partition": index, "fetch_offset": offset, "partition_max_bytes": 1 << 20}
                    for index in partitions
                ],
            }
        ]
        if partitions
        else [],
        "forgotten_topics_data": [{"topic": TOPIC, "partitions": list(forgotten)}]
        if forgotten
        else [],
    }
    return encode_body(FETCH, FETCH_VERSION, fields)


def read_answer(parts: list[Any]) -> Any:
    body = b"".join(part if isinstance(part, bytes) else bytes(part) for part in parts)
    answer, _ = entity_reader(codec.response_class(FETCH, FETCH_VERSION))(memoryview(body), 0)
    return answer


def decoded(body: bytes) -> FetchRequest:
    return decode_request(FetchRequest, FETCH, FETCH_VERSION, body, 0)


async def call(broker: Broker, request: FetchRequest) -> list[Any]:
    context = RequestContext(RequestHeader(FETCH, FETCH_VERSION, 1, "bench"), broker)
    parts = await fetch.handle(request, context)
    for part in parts:  # a disk read's file regions, as the server would after sending
        close = getattr(part, "close", None)
        if close is not None:
            close()
    return parts


async def next_call(broker: Broker, queued: Iterator[FetchRequest]) -> list[Any]:
    return await call(broker, next(queued))


def decode_cost(body: bytes, requests: int) -> float:
    """Mean µs to decode ``body`` (the server's share before the handler)."""
    start = time.process_time()
    for _ in range(requests):
        decoded(body)
    return (time.process_time() - start) / requests * 1e6


async def timed(requests: int, send: Callable[[], Any]) -> float:
    """Mean CPU µs per request over ``requests`` calls of ``send`` (CPU time: the
    machine's other work inflates it less than the wall clock)."""
    start = time.process_time()
    for _ in range(requests):
        await send()
    return (time.process_time() - start) / requests * 1e6


async def open_broker(directory: str, partition_count: int, disk: bool) -> Broker:
    settings = {"log.dirs": directory, "kshim.full.view.process": "false"}
    config = BrokerConfig.load([settings])
    broker = Broker(config) if disk else Broker(config, logs=MemoryLogStore(wall_clock_ms))
    await broker.start()
    await broker.topics.create(TOPIC, partition_count, {})
    records = [Record(index, 0, b"k", b"v" * 100) for index in range(RECORDS)]
    batch = memoryview(build_batch(records, BatchSpec()))
    data = tuple(PartitionData(index, batch) for index in range(partition_count))
    produce = ProduceRequest(None, -1, 5000, (TopicData(TOPIC, data),))
    header = RequestHeader(0, PRODUCE_VERSION, 1, "bench")
    await produce_handler.handle(produce, RequestContext(header, broker))
    return broker


async def measure(partition_count: int, requests: int, disk: bool) -> dict[str, float]:
    """µs per request of each case's handler call, and of decoding its request."""
    indexes = list(range(partition_count))
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as directory:
        broker = await open_broker(directory, partition_count, disk)
        try:
            idle = fetch_body(indexes, RECORDS, NO_SESSION, FINAL_EPOCH)
            data = fetch_body(indexes, 0, NO_SESSION, FINAL_EPOCH)
            for case, body in (("full idle", idle), ("full data", data)):
                request = decoded(body)
                results[case] = await timed(requests, functools.partial(call, broker, request))
                results[f"{case} (decode)"] = decode_cost(body, requests)
            opening = decoded(fetch_body(indexes, RECORDS, NO_SESSION, NEW_SESSION_EPOCH))
            session_id = read_answer(await call(broker, opening)).session_id
            if session_id == NO_SESSION:
                return results
            epochs = iter(range(1, 2 * requests + 1))
            for case, named in (("incremental idle", []), ("incremental data", [0])):
                # Every epoch's request decoded ahead, as the full fetch's is.
                bodies = [fetch_body(named, 0, session_id, next(epochs)) for _ in range(requests)]
                queued = iter([decoded(body) for body in bodies])
                results[case] = await timed(requests, functools.partial(next_call, broker, queued))
                results[f"{case} (decode)"] = decode_cost(bodies[0], requests)
        finally:
            await broker.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--disk", action="store_true")
    options = parser.parse_args()
    print(f"{'':16}{'case':<28}{'handler':>10}{'decode':>10}")
    for partition_count in (1, 100):
        samples: dict[str, list[float]] = {}
        for _ in range(options.repeats):
            cost = asyncio.run(measure(partition_count, options.requests, options.disk))
            for case, micros in cost.items():
                samples.setdefault(case, []).append(micros)
        for case, values in samples.items():
            if case.endswith("(decode)"):
                continue
            handler = min(values)
            decode = min(samples[f"{case} (decode)"])
            print(f"{partition_count:>4} partitions  {case:<28}{handler:8.1f}µs{decode:8.1f}µs")


if __name__ == "__main__":
    main()

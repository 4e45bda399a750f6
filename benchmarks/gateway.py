"""Apache Kafka reached directly, through one ``kshim gateway`` and through two, in one run.

    python -m benchmarks.gateway [--records-100b 300000] [--records-1kib 100000]
                                 [--repeats 3] [--json benchmarks/results/gateway.json]

One Kafka 3.9 from the pinned jars (``python -m kshim.jvm``) at its defaults runs for the
whole run, with two gateways in front of it (``python -m kshim gateway``, each a process of
its own). Each repeat runs every shape on the three routes, in an order that rotates from
repeat to repeat: confluent-kafka producing (acks=all, idempotent) and consuming 100 B and
1 KiB records, and the end-to-end latency of 1,000 records/s (send -> consumer, and send ->
acknowledgement). Through two gateways the producer goes through the first and the consumer
through the second. With socat installed, a fourth route goes through it instead, a C byte
relay on a second Kafka listener (relay_floor.py): what relaying costs any process here,
the floor under the gateway's figures. CPU is of whole process trees: Kafka's JVM, each
gateway's process, socat's; the relays' CPU per record is what relaying costs.

Targets (docs/gateway.md): a relayed produce or fetch costs at most 10 us of gateway CPU per
request and adds at most 1 ms to the end-to-end p50. Prints Markdown tables and writes them
(``.md``) beside the JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import platform
import statistics
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from benchmarks import relay_floor, workloads
from benchmarks.brokers import RunningBroker, running
from benchmarks.result_files import machine_load, write_result
from kshim.testing import GatewayProcess

ROUTES = ("direct", "one gateway", "two gateways", "socat")
LATENCY_RATE = 1_000
LATENCY_SECONDS = 8.0
LATENCY_WARM_UP_S = 2.0
RESULTS = Path("benchmarks/results/gateway.json")


@dataclass(frozen=True)
class Route:
    """Where the producer and the consumer connect, and the gateways in between."""

    name: str
    produce_via: RunningBroker  # bootstrap for the producer, CPU read from Kafka's tree
    consume_via: RunningBroker
    gateways: tuple[RunningBroker, ...]

    def gateway_cpu_seconds(self) -> float:
        return sum(gateway.cpu_seconds() for gateway in self.gateways)


@contextlib.contextmanager
def running_gateway(upstream: str) -> Iterator[RunningBroker]:
    """``kshim gateway`` in front of ``upstream`` until the block ends."""
    with tempfile.TemporaryDirectory(prefix="bench-gateway-") as directory:
        gateway = GatewayProcess(directory, upstream).start()
        try:
            assert gateway.process is not None
            yield RunningBroker(
                "gateway", gateway.bootstrap, gateway.process.pid, None, gateway.process,
                gateway.started_in_s or float("nan"),
            )  # fmt: skip
        finally:
            gateway.stop()


def routes(
    kafka: RunningBroker,
    first: RunningBroker,
    second: RunningBroker,
    socat: RunningBroker | None = None,
) -> list[Route]:
    def via(gateway: RunningBroker) -> RunningBroker:
        return replace(kafka, bootstrap=gateway.bootstrap)

    found = [
        Route("direct", kafka, kafka, ()),
        Route("one gateway", via(first), via(first), (first,)),
        Route("two gateways", via(first), via(second), (first, second)),
    ]
    if socat is not None:
        found.append(Route("socat", via(socat), via(socat), (socat,)))
    return found


Metrics = dict[str, float]


def throughput_shape(route: Route, record_bytes: int, count: int) -> Metrics:
    """Produces ``count`` records of ``record_bytes`` through the route, then consumes them."""
    topic = f"gateway-{record_bytes}-{uuid.uuid4().hex[:8]}"
    workloads.create_topic(route.produce_via, topic)
    gateway_before = route.gateway_cpu_seconds()
    produced = workloads.produce(route.produce_via, topic, count, record_bytes)
    gateway_produce = route.gateway_cpu_seconds() - gateway_before
    gateway_before = route.gateway_cpu_seconds()
    consumed = workloads.consume(route.consume_via, topic, count, record_bytes)
    gateway_consume = route.gateway_cpu_seconds() - gateway_before
    return {
        "produce_records_per_s": produced.records_per_second,
        "consume_records_per_s": consumed.records_per_second,
        "kafka_cpu_us_per_record_produced": produced.broker_cpu_microseconds_per_record,
        "gateway_cpu_us_per_record_produced": gateway_produce / produced.records * 1e6,
        "gateway_cpu_us_per_record_consumed": gateway_consume / consumed.records * 1e6,
    }


def latency_shape(route: Route) -> Metrics:
    """End-to-end and acknowledgement latency at LATENCY_RATE records/s through the route."""
    topic = f"gateway-latency-{uuid.uuid4().hex[:8]}"
    workloads.create_topic(route.produce_via, topic)
    consumer = Consumer({"bootstrap.servers": route.consume_via.bootstrap, "group.id": topic,
                         "enable.auto.commit": False})  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    consumer.consume(1, 1.0)
    producer = Producer({"bootstrap.servers": route.produce_via.bootstrap})
    gateway_before = route.gateway_cpu_seconds()
    result = workloads.paced_latency(
        producer, consumer, [topic], LATENCY_RATE, LATENCY_SECONDS,
        int(LATENCY_RATE * LATENCY_WARM_UP_S),
    )  # fmt: skip
    records = LATENCY_RATE * (LATENCY_SECONDS + LATENCY_WARM_UP_S)
    gateway_cpu = route.gateway_cpu_seconds() - gateway_before
    return {
        "e2e_p50_ms": result["p50_ms"],
        "e2e_p99_ms": result["p99_ms"],
        "ack_p50_ms": result["ack_p50_ms"],
        "ack_p99_ms": result["ack_p99_ms"],
        # Each record is produced once and fetched once at this rate: about two requests.
        "gateway_cpu_us_per_record_paced": gateway_cpu / records * 1e6,
    }


def run(counts: dict[int, int], repeats: int) -> dict[str, dict[str, list[float]]]:
    samples: dict[str, dict[str, list[float]]] = {route: {} for route in ROUTES}
    shapes: list[Callable[[Route], Metrics]] = [
        *(_throughput(size, count) for size, count in counts.items()),
        latency_shape,
    ]
    with contextlib.ExitStack() as stack:
        kafka, socat = stack.enter_context(upstream())
        first = stack.enter_context(running_gateway(kafka.bootstrap))
        second = stack.enter_context(running_gateway(kafka.bootstrap))
        all_routes = routes(kafka, first, second, socat)
        for repeat in range(repeats):
            turn = repeat % len(all_routes)
            rotated = all_routes[turn:] + all_routes[:turn]
            for shape in shapes:
                for route in rotated:
                    for key, value in shape(route).items():
                        samples[route.name].setdefault(key, []).append(value)
            print(f"repeat {repeat + 1} of {repeats} done", file=sys.stderr, flush=True)
    return samples


@contextlib.contextmanager
def upstream() -> Iterator[tuple[RunningBroker, RunningBroker | None]]:
    """Kafka, with the socat route beside it when socat is installed (relay_floor.py)."""
    if relay_floor.socat_missing() is not None:
        with running("kafka") as kafka:
            yield kafka, None
        return
    with relay_floor.kafka_behind_socat() as relayed:
        yield relayed.kafka, relayed.relayed


def _throughput(size: int, count: int) -> Callable[[Route], Metrics]:
    def shape(route: Route) -> Metrics:
        return {
            f"{key}_{size}B": value for key, value in throughput_shape(route, size, count).items()
        }

    return shape


def table(samples: dict[str, dict[str, list[float]]]) -> list[str]:
    keys = list(samples["direct"])
    measured = [route for route in ROUTES if samples.get(route)]
    lines = [
        "| metric | " + " | ".join(measured) + " | one gateway / direct |",
        "|---|" + "---:|" * (len(measured) + 1),
    ]
    for key in keys:
        values = [statistics.median(samples[route].get(key, [float("nan")])) for route in measured]
        ratio = values[1] / values[0] if values[0] else float("nan")
        cells = " | ".join(_number(value) for value in values)
        lines.append(f"| {key} | {cells} | {ratio:.2f} |")
    return lines


def _number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records-100b", type=int, default=300_000)
    parser.add_argument("--records-1kib", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, default=RESULTS)
    arguments = parser.parse_args(argv)
    started = datetime.datetime.now(datetime.UTC)
    samples = run({100: arguments.records_100b, 1024: arguments.records_1kib}, arguments.repeats)
    command = "python -m benchmarks.gateway " + " ".join(argv if argv is not None else sys.argv[1:])
    heading = (
        f"Kafka 3.9 direct and through `kshim gateway`, {arguments.repeats} repeats, medians; "
        f"`{command.strip()}`, {started:%Y-%m-%d %H:%M} UTC, {machine_load()}"
    )
    document = {"started": started.isoformat(), "machine": platform.machine(), "samples": samples}
    write_result(arguments.json, [heading, "", *table(samples)], document, indent=1)


if __name__ == "__main__":
    main()

"""What serving Prometheus metrics costs the producers: produce throughput with /metrics
scraped every second next to metrics off, in the same run.

    python -m benchmarks.metrics [--records 2000000] [--small-records 20000]
                                 [--topics-records 800000] [--repeats 3]
                                 [--shapes throughput small_requests topics_100]
                                 [--baseline DIR] [--json PATH]

Each run starts a fresh kshim broker (fsync on, default settings; the whole process tree
counted in every CPU and RSS figure) in one of two configurations: metrics off
(``kshim.metrics.listen`` set to nothing) and metrics on (``kshim.metrics.listen`` on a
free loopback port) with a thread of this process GETting /metrics every second while the
records are produced, reading each answer whole (scrapes, failed scrapes, the GET's
duration and the size of an answer are recorded); once the records are in, 30 scrapes
back to back give the broker's CPU per scrape, and at one scrape a second its share of
the broker's CPU with metrics off (a measure the machine's noise moves far less than the
produce rate). With metrics off the broker counts nothing either (nothing could scrape
it), so the comparison is the whole cost: counting requests and flush rounds, serving and
scraping. With ``--baseline DIR`` a third configuration runs kshim from the checkout DIR
(e.g. the commit before metrics) with its defaults.
Three shapes of load, confluent-kafka with acks=all and 100 B records:

- throughput: ``--records`` records to one topic, linger.ms=5, as fast as the producer goes;
- small_requests: ``--small-records`` records, one per Produce request (linger.ms=0,
  batch.num.messages=1, at most 5 requests in flight): the per-request cost, since request
  counters and latency histograms are updated per request (the count of Produce requests
  the broker saw is read from its last scrape when metrics are on);
- topics_100: ``--topics-records`` records spread round-robin over 100 topics, linger.ms=5 (a
  scrape reads every partition's offsets and sizes and every topic's traffic).

Within each of ``--repeats`` repeats every shape runs once per configuration, each
configuration going first in every other repeat (off, on; on, off; ...) so that neither the
machine's noise nor the order favours one.
Reported per shape and configuration: median and min-max of records/s, broker CPU µs per
record and peak RSS; the on/off ratio of the medians and of each repeat's pair. The target
is a cost under 3% of produce throughput (on/off >= 0.97): met when every repeat's pair
meets it, missed when none does, else within noise. Prints a Markdown table and writes the
JSON (default benchmarks/results/metrics.json).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from benchmarks.brokers import BASELINE, RunningBroker, running, sampled
from benchmarks.workloads import TIMEOUT_S, create_topic, send
from kshim.testing import free_port

RECORD_BYTES = 100
SCRAPE_INTERVAL_S = 1.0
SCRAPE_TIMEOUT_S = 10.0
ENDPOINT_TIMEOUT_S = 10.0
MANY_TOPICS = 100
IDLE_SCRAPES = 30
TARGET_RATIO = 0.97  # metrics on keeps at least 97% of the produce rate of metrics off
OFF, ON = "metrics off", "metrics on"
SHAPES = ("throughput", "small_requests", "topics_100")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--small-records", type=int, default=20_000)
    parser.add_argument("--topics-records", type=int, default=800_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=SHAPES)
    parser.add_argument("--baseline", default=None, help="also kshim from this checkout")
    parser.add_argument("--json", default="benchmarks/results/metrics.json")
    arguments = parser.parse_args()
    configurations = [OFF, ON]
    if arguments.baseline is not None:
        os.environ["KSHIM_BASELINE_DIR"] = arguments.baseline
        configurations.append(BASELINE)
    started = time.perf_counter()
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {
        shape: {configuration: [] for configuration in configurations} for shape in arguments.shapes
    }
    for repeat in range(arguments.repeats):
        for shape in arguments.shapes:
            count = {"throughput": arguments.records, "small_requests": arguments.small_records,
                     "topics_100": arguments.topics_records}[shape]  # fmt: skip
            # Each configuration goes first in every other repeat: a broker started second
            # (warmer caches, a fuller disk) must not favour one of them.
            order = configurations if repeat % 2 == 0 else configurations[::-1]
            for configuration in order:
                run = measure(configuration, shape, count)
                runs[shape][configuration].append(run)
                rate, seconds = run["records_per_s"], run["seconds"]
                print(
                    f"repeat {repeat + 1}/{arguments.repeats} {shape} {configuration}: "
                    f"{rate:,.0f} records/s, {seconds:.1f} s",
                    flush=True,
                )
    results: dict[str, Any] = {
        "command": "python -m benchmarks.metrics",
        "arguments": vars(arguments),
        "machine": _machine(),
        "finished": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "total_s": time.perf_counter() - started,
        "target": f"metrics on keeps >= {TARGET_RATIO:.0%} of the records/s of metrics off",
        "shapes": {shape: summarize(by_configuration) for shape, by_configuration in runs.items()},
        "runs": runs,
    }
    print(render(results))
    Path(arguments.json).write_text(json.dumps(results, indent=2) + "\n")


def measure(configuration: str, shape: str, count: int) -> dict[str, Any]:
    """One fresh broker in ``configuration``, one run of ``shape`` with ``count`` records."""
    metrics_port = free_port() if configuration == ON else None
    name = BASELINE if configuration == BASELINE else "kshim"
    settings: list[str] = []
    if configuration != BASELINE:
        address = "" if metrics_port is None else f"127.0.0.1:{metrics_port}"
        settings.append(f"kshim.metrics.listen={address}")
    with running(name, settings) as broker:
        topics = _topics(broker, shape)
        producer = Producer(_producer_config(broker, shape))
        _warm_up(producer, topics)
        url = None if metrics_port is None else f"http://127.0.0.1:{metrics_port}/metrics"
        requests_before = 0.0
        if url is not None:
            _wait_ready(url.replace("/metrics", "/healthz"))
            requests_before = _produce_requests(_scrape(url)[1].decode())  # the warm-up's
        with _scraping(url) as scraper, sampled(broker) as usage:
            started = time.perf_counter()
            if shape == "small_requests":
                _produce_small(producer, topics[0], count)
            else:
                _produce_fast(producer, topics, count)
            seconds = time.perf_counter() - started
        producer.close()  # before the broker stops: no reconnecting client in the logs
        run: dict[str, Any] = {
            "records": count,
            "seconds": seconds,
            "records_per_s": count / seconds,
            "broker_cpu_us_per_record": usage.cpu_seconds * 1e6 / count,
            "peak_rss_mb": usage.peak_rss_bytes / 1e6,
            "broker_cores": usage.cpu_seconds / seconds,
        }
        if url is not None:
            run.update(scraper.summary())
            last = _scrape(url)[1].decode()
            run["produce_requests"] = _produce_requests(last) - requests_before
            run["records_per_produce_request"] = count / max(run["produce_requests"], 1.0)
            run["broker_cpu_ms_per_scrape"] = _cpu_per_scrape(broker, url) * 1000
    return run


def _cpu_per_scrape(broker: RunningBroker, url: str) -> float:
    """Broker CPU seconds per scrape, from IDLE_SCRAPES back to back once the records are
    in (the broker otherwise idle): what one scrape costs, apart from the produce's noise."""
    before = broker.cpu_seconds()
    for _ in range(IDLE_SCRAPES):
        _scrape(url)
    return (broker.cpu_seconds() - before) / IDLE_SCRAPES


def _topics(broker: RunningBroker, shape: str) -> list[str]:
    if shape != "topics_100":
        create_topic(broker, "bench")
        return ["bench"]
    topics = [f"bench-{index}" for index in range(MANY_TOPICS)]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    configs = {"kshim.full.view": "false"}  # as create_topic: the log itself is measured
    created = admin.create_topics([NewTopic(topic, 1, 1, config=configs) for topic in topics])
    for future in created.values():
        future.result(TIMEOUT_S)
    return topics


def _producer_config(broker: RunningBroker, shape: str) -> dict[str, Any]:
    config: dict[str, Any] = {"bootstrap.servers": broker.bootstrap, "acks": "all"}
    if shape == "small_requests":
        config.update({"linger.ms": 0, "batch.num.messages": 1,
                       "max.in.flight.requests.per.connection": 5})  # fmt: skip
    else:
        config["linger.ms"] = 5
    return config


def _warm_up(producer: Producer, topics: Sequence[str]) -> None:
    """One record to each topic, acknowledged: connected, metadata known, before the clock."""
    for topic in topics:
        send(producer, topic, b"w" * RECORD_BYTES)
    if producer.flush(TIMEOUT_S):
        raise RuntimeError("warm-up records not acknowledged")


def _produce_fast(producer: Producer, topics: Sequence[str], count: int) -> None:
    payload = b"x" * RECORD_BYTES
    for index in range(count):
        send(producer, topics[index % len(topics)], payload)
    if producer.flush(TIMEOUT_S):
        raise RuntimeError("records not acknowledged")


def _produce_small(producer: Producer, topic: str, count: int) -> None:
    """``count`` records, each its own request (the producer's settings see to that);
    librdkafka keeps at most 5 requests in flight, the rest wait in its queue."""
    payload = b"x" * RECORD_BYTES
    failed: list[str] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            failed.append(str(error))

    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value=payload, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.001)
        producer.poll(0)
    if producer.flush(TIMEOUT_S) or failed:
        raise RuntimeError(f"records not acknowledged: {failed[:3]}")


def _wait_ready(url: str) -> None:
    deadline = time.perf_counter() + ENDPOINT_TIMEOUT_S
    while time.perf_counter() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1.0) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"{url} did not answer 200 within {ENDPOINT_TIMEOUT_S} s")


def _scrape(url: str) -> tuple[float, bytes]:
    """One GET of ``url``, the answer read whole: (seconds, body). Raises on failure."""
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT_S) as response:
        body: bytes = response.read()
        if response.status != 200:
            raise OSError(f"{url}: HTTP {response.status}")
    return time.perf_counter() - started, body


@dataclass
class _Scraper:
    """Scrapes ``url`` every SCRAPE_INTERVAL_S in a thread (the first at once)."""

    url: str | None
    durations_s: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    last_bytes: int = 0
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)

    def run(self) -> None:
        if self.url is None:
            return
        started = time.perf_counter()
        scrapes = 0
        while True:
            try:
                seconds, body = _scrape(self.url)
                self.durations_s.append(seconds)
                self.last_bytes = len(body)
            except Exception as error:  # counted, and the next scrape is tried
                self.failures.append(repr(error))
            scrapes += 1
            next_at = started + scrapes * SCRAPE_INTERVAL_S
            if self._stop.wait(max(0.0, next_at - time.perf_counter())):
                return

    def summary(self) -> dict[str, Any]:
        durations_ms = [seconds * 1000 for seconds in self.durations_s]
        return {
            "scrapes": len(self.durations_s) + len(self.failures),
            "failed_scrapes": len(self.failures),
            "failures": self.failures[:5],
            "scrape_ms_median": statistics.median(durations_ms) if durations_ms else None,
            "scrape_ms_max": max(durations_ms, default=None),
            "scrape_bytes": self.last_bytes,
            "scrape_ms": [round(duration, 3) for duration in durations_ms],
        }


@contextmanager
def _scraping(url: str | None) -> Iterator[_Scraper]:
    scraper = _Scraper(url)
    thread = threading.Thread(target=scraper.run, name="scraper", daemon=True)
    thread.start()
    try:
        yield scraper
    finally:
        scraper._stop.set()
        thread.join()


def _produce_requests(exposition: str) -> float:
    """Produce requests answered, summed over versions and errors, from a scrape."""
    total = 0.0
    for line in exposition.splitlines():
        if line.startswith("kshim_requests_total{") and 'api="Produce"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def summarize(by_configuration: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Median, min and max of each measurement per configuration; on/off ratios."""
    summary: dict[str, Any] = {}
    for configuration, runs in by_configuration.items():
        summary[configuration] = {
            name: _spread([run[name] for run in runs])
            for name in ("records_per_s", "broker_cpu_us_per_record", "peak_rss_mb")
        }
    on_runs = by_configuration[ON]
    durations = [duration for run in on_runs for duration in run["scrape_ms"]]
    summary[ON].update({
        "scrapes": sum(run["scrapes"] for run in on_runs),
        "failed_scrapes": sum(run["failed_scrapes"] for run in on_runs),
        "scrape_ms_median": statistics.median(durations) if durations else None,
        "scrape_ms_max": max(durations, default=None),
        "scrape_bytes": max(run["scrape_bytes"] for run in on_runs),
        "records_per_produce_request": statistics.median(
            run["records_per_produce_request"] for run in on_runs
        ),
        "broker_cpu_ms_per_scrape": _spread([run["broker_cpu_ms_per_scrape"] for run in on_runs]),
        # at one scrape a second, the share of the broker's CPU with metrics off
        "scrape_share_of_broker_cpu": statistics.median(
            run["broker_cpu_ms_per_scrape"] for run in on_runs
        ) / 1000 / statistics.median(run["broker_cores"] for run in by_configuration[OFF]),
    })  # fmt: skip
    ratios: dict[str, Any] = {}
    for other, other_runs in by_configuration.items():
        if other == OFF:
            continue
        for name in ("records_per_s", "broker_cpu_us_per_record", "peak_rss_mb"):
            paired = [
                run[name] / off[name]
                for run, off in zip(other_runs, by_configuration[OFF], strict=True)
            ]
            key = f"{name}_{_short(other)}_over_off"
            ratios[key] = {
                "of_medians": summary[other][name]["median"] / summary[OFF][name]["median"],
                "paired": _spread(paired),
            }
    summary["ratios"] = ratios
    rate = ratios["records_per_s_on_over_off"]
    summary["throughput_cost"] = 1 - rate["of_medians"]
    summary["verdict"] = _verdict(rate["paired"])
    return summary


def _verdict(paired: dict[str, float]) -> str:
    """'met' when every repeat's metrics-on run kept TARGET_RATIO of its metrics-off
    partner's rate, 'missed' when none did, else 'within noise': the repeats disagree, and
    the median alone would be noise read as a result."""
    if paired["min"] >= TARGET_RATIO:
        return "met"
    if paired["max"] < TARGET_RATIO:
        return "missed"
    return "within noise"


def _short(configuration: str) -> str:
    return {ON: "on", OFF: "off"}.get(configuration, "baseline")


def _spread(values: Sequence[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def _machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_before": os.getloadavg()[0],
    }


def _shown(spread: dict[str, float], digits: int) -> str:
    form: Callable[[float], str] = lambda value: f"{value:,.{digits}f}"  # noqa: E731
    return f"{form(spread['median'])} ({form(spread['min'])}-{form(spread['max'])})"


def render(results: dict[str, Any]) -> str:
    """The Markdown table: per shape, each measurement's median (min-max) per
    configuration and the on/off ratio, then the scrapes."""
    shapes: dict[str, Any] = results["shapes"]
    configurations = [c for c in next(iter(shapes.values())) if c not in _SUMMARY_KEYS]
    others = [c for c in configurations if c != OFF]
    header = "| shape | measurement | " + " | ".join(configurations) + " | "
    header += " | ".join(f"{_short(c)}/off: of medians; per repeat" for c in others) + " |"
    lines = [header, "|" + "---|" * (2 + len(configurations) + len(others))]
    for shape, summary in shapes.items():
        for name, label, digits in (
            ("records_per_s", "records/s", 0),
            ("broker_cpu_us_per_record", "broker CPU µs/record", 2),
            ("peak_rss_mb", "peak RSS, MB", 1),
        ):
            cells = [_shown(summary[c][name], digits) for c in configurations]
            for other in others:
                ratio = summary["ratios"][f"{name}_{_short(other)}_over_off"]
                cells.append(f"{ratio['of_medians']:.3f}; {_shown(ratio['paired'], 3)}")
            lines.append(f"| {shape} | {label} | " + " | ".join(cells) + " |")
        on = summary[ON]
        scrapes = (
            f"{on['scrapes']} scrapes, {on['failed_scrapes']} failed; GET "
            f"{on['scrape_ms_median']:.1f} ms median, {on['scrape_ms_max']:.1f} ms max; "
            f"{on['scrape_bytes']:,} B each; {on['records_per_produce_request']:,.1f} "
            f"records per Produce request; broker CPU per scrape (idle, back to back) "
            f"{_shown(on['broker_cpu_ms_per_scrape'], 1)} ms, "
            f"{on['scrape_share_of_broker_cpu']:.1%} of the broker's CPU with metrics off"
        )
        verdict = summary["verdict"]
        cost = f"cost {summary['throughput_cost']:.1%} of records/s (of medians), wanted < 3%: " + (
            f"**{verdict}**" if verdict == "missed" else verdict
        )
        empty = [""] * (len(configurations) + len(others) - 2)
        lines.append(
            f"| {shape} | scrapes (metrics on) | " + " | ".join([scrapes, cost, *empty]) + " |"
        )
    return "\n".join(lines)


_SUMMARY_KEYS = ("ratios", "throughput_cost", "verdict")


if __name__ == "__main__":
    main()

"""The metrics endpoint's HTTP side (kshim/server/metrics/endpoint.py) and the health
check's readiness probe (kshim/healthcheck.py): /healthz follows the event loop, not just
the port; a scrape of an empty registry, unknown paths. Real sockets on loopback."""

from __future__ import annotations

import asyncio
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter

from kshim.healthcheck import UnhealthyError, ready
from kshim.server.metrics.endpoint import READY_TIMEOUT_S, MetricsEndpoint
from kshim.server.metrics.request_metrics import RequestMetrics
from kshim.testing import free_port

TIMEOUT_S = 10.0


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop running in a thread of its own, as the broker's runs beside the
    endpoint's thread."""
    running = asyncio.new_event_loop()
    thread = threading.Thread(target=running.run_forever, daemon=True)
    thread.start()
    yield running
    running.call_soon_threadsafe(running.stop)
    thread.join(TIMEOUT_S)
    running.close()


@pytest.fixture
def endpoint(loop: asyncio.AbstractEventLoop) -> Iterator[tuple[MetricsEndpoint, str]]:
    registry = CollectorRegistry()
    Counter("kshim_test_events", "Events of the test", registry=registry).inc(3)
    served = MetricsEndpoint(registry, loop)
    host, port = served.start("127.0.0.1", 0)
    yield served, f"http://{host}:{port}"
    served.stop()


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_healthz_answers_503_until_started_then_200(
    endpoint: tuple[MetricsEndpoint, str],
) -> None:
    served, base = endpoint
    assert get(f"{base}/healthz") == (503, "not ready\n")
    with pytest.raises(UnhealthyError, match="503"):
        ready(f"{base}/healthz")
    served.started = True
    assert get(f"{base}/healthz") == (200, "ready\n")
    ready(f"{base}/healthz")


def test_healthz_answers_503_while_the_event_loop_is_stuck(
    endpoint: tuple[MetricsEndpoint, str], loop: asyncio.AbstractEventLoop
) -> None:
    served, base = endpoint
    served.started = True
    stuck = READY_TIMEOUT_S + 1.5
    loop.call_soon_threadsafe(time.sleep, stuck)  # a handler blocking the loop
    time.sleep(0.1)
    started = time.monotonic()
    assert get(f"{base}/healthz")[0] == 503
    assert time.monotonic() - started < stuck  # answered at the timeout, not after the stall
    deadline = time.monotonic() + TIMEOUT_S
    while get(f"{base}/healthz")[0] != 200:  # ready again once the loop runs
        assert time.monotonic() < deadline
        time.sleep(0.1)


def test_metrics_are_served_in_the_text_format(endpoint: tuple[MetricsEndpoint, str]) -> None:
    _, base = endpoint
    status, text = get(f"{base}/metrics")
    assert status == 200
    assert "kshim_test_events_total 3.0" in text.splitlines()


def test_other_paths_are_not_found(endpoint: tuple[MetricsEndpoint, str]) -> None:
    _, base = endpoint
    assert get(f"{base}/nothing")[0] == 404


def test_stop_frees_the_port(loop: asyncio.AbstractEventLoop) -> None:
    port = free_port()
    for _ in range(2):  # bound again after a stop
        served = MetricsEndpoint(CollectorRegistry(), loop)
        served.start("127.0.0.1", port)
        served.stop()


def test_ready_fails_where_nothing_listens() -> None:
    with pytest.raises(UnhealthyError, match=r"127\.0\.0\.1"):
        ready(f"http://127.0.0.1:{free_port()}/healthz", timeout_s=2.0)


def test_requests_are_counted_by_api_version_error_and_timed_in_buckets() -> None:
    requests = RequestMetrics()
    for seconds in (0.0001, 0.0005, 0.003, 40.0):  # 0.0005 is in le="0.0005": at most
        requests.observe(0, 9, 0, seconds)
    requests.observe(3, 12, 3, 0.001)
    counted, timed = requests.families()
    counts = {(s.labels["api"], s.labels["version"], s.labels["error"], s.value)
              for s in counted.samples}  # fmt: skip
    assert counts == {
        ("Produce", "9", "none", 4),
        ("Metadata", "12", "unknown_topic_or_partition", 1),
    }
    produce = {s.name + s.labels.get("le", ""): s.value for s in timed.samples
               if s.labels["api"] == "Produce"}  # fmt: skip
    assert (produce["kshim_request_duration_seconds_bucket0.0005"],
            produce["kshim_request_duration_seconds_bucket0.005"],
            produce["kshim_request_duration_seconds_bucket30.0"],
            produce["kshim_request_duration_seconds_bucket+Inf"],
            produce["kshim_request_duration_seconds_count"]) == (2, 3, 3, 4, 4)  # fmt: skip
    assert produce["kshim_request_duration_seconds_sum"] == pytest.approx(40.0036)

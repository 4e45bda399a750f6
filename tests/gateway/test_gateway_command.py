"""``kshim gateway`` as a user runs it: its listening line, its metrics and health, and its
one-line errors."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest

from kshim.testing import BrokerProcess, free_port

TIMEOUT_S = 30.0


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path / "data").start()
    yield broker
    broker.stop()


def test_the_gateway_serves_its_metrics_and_health(upstream: BrokerProcess) -> None:
    port, metrics_port = free_port(), free_port()
    command = [sys.executable, "-m", "kshim", "gateway", "--upstream", upstream.bootstrap]
    command += ["--listen", f"127.0.0.1:{port}", "--broker-port-base", str(free_port() - 1)]
    command += ["--metrics-listen", f"127.0.0.1:{metrics_port}"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        assert process.stdout is not None
        listening = process.stdout.readline().decode()
        assert listening.startswith(f"kshim gateway: listening on 127.0.0.1:{port}, relaying to")
        assert "metrics on" in process.stdout.readline().decode()
        producer = confluent_kafka.Producer({"bootstrap.servers": f"127.0.0.1:{port}"})
        producer.produce("gateway-metrics", b"x")
        assert producer.flush(TIMEOUT_S) == 0
        base = f"http://127.0.0.1:{metrics_port}"
        with urllib.request.urlopen(base + "/healthz", timeout=TIMEOUT_S) as health:
            assert health.read().decode().splitlines()[:2] == ["ready", "role=gateway"]
        with urllib.request.urlopen(base + "/metrics", timeout=TIMEOUT_S) as answer:
            metrics = _values(answer.read().decode())
        assert metrics["kshim_gateway_requests_total"] >= 3  # ApiVersions, Metadata, Produce
        assert metrics["kshim_gateway_answers_rewritten_total"] >= 2
        assert metrics["kshim_gateway_upstream_brokers"] == 1
        assert metrics["kshim_gateway_connections_accepted_total"] >= 2  # bootstrap, broker
    finally:
        process.terminate()
        assert process.wait(TIMEOUT_S) == 0


def _values(text: str) -> dict[str, float]:
    return {
        line.split()[0]: float(line.split()[1])
        for line in text.splitlines()
        if line and not line.startswith("#") and "{" not in line
    }


def test_an_upstream_that_does_not_answer_is_one_error_line() -> None:
    command = [sys.executable, "-m", "kshim", "gateway", "--upstream", f"127.0.0.1:{free_port()}"]
    command += ["--listen", f"127.0.0.1:{free_port()}"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("kshim gateway: error: no upstream broker answers at 127.0.0.1:")


def test_a_listen_port_in_use_is_one_error_line(upstream: BrokerProcess) -> None:
    command = [sys.executable, "-m", "kshim", "gateway", "--upstream", upstream.bootstrap]
    command += ["--listen", upstream.bootstrap]  # the broker's own port
    done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    assert done.returncode == 1
    assert done.stderr.strip() == "kshim gateway: error: cannot listen: address already in use"

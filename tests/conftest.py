"""Fixtures and checks shared by every test under ``tests/``."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kshim.testing import BrokerProcess

# Scenario modules shared by the broker's tests and the gateway's: their asserts show the
# values compared, as a test module's do.
pytest.register_assert_rewrite(
    "tests.e2e.delay_scenarios", "tests.e2e.delay_records", "tests.e2e.delay_max_scenario"
)

# kafka-python 3 names the thread that runs each client's network loop so.
KAFKA_PYTHON_IO_THREAD = "kafka-io-"
THREAD_EXIT_WAIT_S = 5.0


def _kafka_python_io_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith(KAFKA_PYTHON_IO_THREAD)}


@pytest.fixture(autouse=True)
def no_kafka_python_client_outlives_its_test() -> Iterator[None]:
    """A kafka-python client left open keeps reconnecting, with random backoff, to a broker
    that has stopped: its log lines land in later tests, and its use of ``random`` makes
    Hypothesis fail later property tests as flaky. Fail the test that left it instead."""
    before = _kafka_python_io_threads()
    yield
    deadline = time.monotonic() + THREAD_EXIT_WAIT_S
    left = _kafka_python_io_threads() - before
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = {thread for thread in left if thread.is_alive()}
    assert not left, f"kafka-python clients left open: {sorted(t.name for t in left)}"


NO_METRICS = "kshim.metrics.listen="


# kshim's own brokers with ``kshim serve``'s defaults. A user's suite gets kafka_bootstrap and
# kafka_broker_factory from the published plugin (kshim/pytest_plugin.py) instead.
@pytest.fixture(scope="session")
def shared_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for tests that only use their own uniquely named topics. Its metrics are
    off: running the whole session, it would hold the default metrics address that
    tests/e2e/test_metrics.py needs free."""
    data_dir = tmp_path_factory.mktemp("shared") / "data"
    broker = BrokerProcess(data_dir, [NO_METRICS]).start()
    yield broker
    broker.stop()


@pytest.fixture
def fresh_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker of its own on an empty data directory (restartable by the test)."""
    broker = BrokerProcess(tmp_path / "data").start()
    yield broker
    broker.stop()

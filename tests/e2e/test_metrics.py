"""The metrics endpoint (``kshim.metrics.listen``) of a real ``kshim serve``, scraped.

Produced records and bytes, offsets, log size, requests and flush rounds; a group's
committed offset and lag; open transactions; pending delayed records; a kept view's lag;
``/healthz`` (and the broker it names), 404, connections, the process tree and the disk;
an empty address serves nothing, an address in use fails ``serve`` (the default one too,
saying what to do), and the health check refuses another broker's readiness. Values are
parsed from the scrape and compared exactly wherever the broker's state makes them exact.
Every wait is bounded; everything is on loopback.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from kshim.client.wire import connect
from kshim.protocol.errors import ErrorCode
from kshim.testing import BrokerProcess, failure_lines, free_port, stop_process, wait_for_port
from tests.e2e.client_helpers import Deadline

pytestmark = pytest.mark.timeout(120)

ORDERS, RECORDS, COMMITTED = "orders", 1000, 600
DEFAULT_METRICS_PORT = 9308
HTTP_TIMEOUT_S = 10.0
WAIT_S = 20.0
INIT_PRODUCER_ID = 22


@dataclass(frozen=True, slots=True)
class Served:
    broker: BrokerProcess
    metrics_port: int

    def scrape(self) -> str:
        status, body = http_get(self.metrics_port, "/metrics")
        assert status == 200, body
        return body


def http_get(port: int, path: str, host: str = "127.0.0.1") -> tuple[int, str]:
    """(status, body) of GET ``path`` on ``host:port``, error statuses included."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=HTTP_TIMEOUT_S) as r:
            return int(r.status), r.read().decode()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.read().decode()


def samples(text: str, name: str, **labels: str) -> list[float]:
    """The values of every sample ``name`` whose labels include ``labels``."""
    return [
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name and all(s.labels.get(key) == value for key, value in labels.items())
    ]


def sample(text: str, name: str, **labels: str) -> float:
    """The value of the one sample ``name`` with ``labels``; fails when there is not one."""
    found = samples(text, name, **labels)
    assert len(found) == 1, f"{name}{labels}: {found}"
    return found[0]


def wait_for_sample(served: Served, name: str, value: float, **labels: str) -> str:
    """Scrapes until ``name{labels}`` is ``value``; returns that scrape."""
    deadline = Deadline(WAIT_S)
    while True:
        text = served.scrape()
        found = samples(text, name, **labels)
        if found == [value]:
            return text
        assert not deadline.expired(), f"{name}{labels}: {found}, not {value}"
        time.sleep(0.1)


def listening_ports(pid: int) -> set[int]:
    """TCP ports process ``pid`` listens on (Linux's /proc: its sockets in LISTEN state)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    ports = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/net/{table}") as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def serve_command(data_dir: Path, metrics_address: str) -> list[str]:
    listen = f"127.0.0.1:{free_port()}"
    setting = f"kshim.metrics.listen={metrics_address}"
    kshim = [sys.executable, "-m", "kshim"]
    return [*kshim, "serve", "--listen", listen, "--data-dir", str(data_dir), "--set", setting]


def ipv6_loopback() -> bool:
    with socket.socket(socket.AF_INET6) as probe:
        try:
            probe.bind(("::1", 0))
        except OSError:
            return False
    return True


def create_topic(bootstrap: str, topic: str, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=config or {})])[topic].result(timeout=WAIT_S)


def produce(bootstrap: str, topic: str, count: int, **settings: str | int) -> None:
    """``count`` records with keys ``k-<n % 100>`` to partition 0, acks=all, flushed."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **settings})
    for index in range(count):
        producer.produce(topic, key=f"k-{index % 100}", value=f"record-{index}", partition=0)
    assert producer.flush(WAIT_S) == 0


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    metrics_port = free_port()
    data_dir = tmp_path_factory.mktemp("metrics") / "data"
    broker = BrokerProcess(data_dir, settings=[f"kshim.metrics.listen=127.0.0.1:{metrics_port}"])
    broker.start()
    try:
        wait_for_port("127.0.0.1", metrics_port, WAIT_S)  # bound just after the Kafka port
        yield Served(broker, metrics_port)
    finally:
        broker.stop()
    assert failure_lines(broker.log_text()) == []


@pytest.fixture(scope="module")
def orders(served: Served) -> str:
    """The topic ``orders`` with RECORDS records (offsets 0 to 999)."""
    create_topic(served.broker.bootstrap, ORDERS)
    produce(served.broker.bootstrap, ORDERS, RECORDS)
    return ORDERS


def test_produced_records_bytes_offsets_requests_and_flush_rounds(
    served: Served, orders: str
) -> None:
    text = served.scrape()
    partition = {"topic": orders, "partition": "0"}
    assert sample(text, "kshim_produced_records_total", topic=orders) == RECORDS
    assert sample(text, "kshim_log_high_watermark", **partition) == RECORDS
    assert sample(text, "kshim_log_end_offset", **partition) == RECORDS
    assert sample(text, "kshim_log_start_offset", **partition) == 0
    produced_bytes = sample(text, "kshim_produced_bytes_total", topic=orders)
    assert produced_bytes > 0
    # A plain producer's batches are stored as received, only their offsets stamped (same
    # length), and nothing else (no control batch) went into this partition: the log is
    # exactly the produced bytes.
    assert sample(text, "kshim_log_size_bytes", **partition) == produced_bytes
    assert sample(text, "kshim_log_segments", **partition) == 1
    produce_requests = sum(samples(text, "kshim_requests_total", api="Produce"))
    assert produce_requests >= 1
    # Produce answers per partition: its top-level error is always "none".
    assert sum(samples(text, "kshim_requests_total", api="Produce", error="none")) == (
        produce_requests
    )
    assert sample(text, "kshim_request_duration_seconds_count", api="Produce") == produce_requests
    assert sample(text, "kshim_request_duration_seconds_bucket", api="Produce", le="+Inf") == (
        produce_requests
    )
    rounds = sample(text, "kshim_log_flush_batches_count")
    assert rounds >= 1
    assert sample(text, "kshim_log_flush_batches_sum") >= rounds
    assert sample(text, "kshim_log_flush_duration_seconds_count") == rounds
    assert sample(text, "kshim_fsyncs_total") >= 1


def test_consumer_group_committed_offset_lag_and_fetched_bytes(served: Served, orders: str) -> None:
    consumer = Consumer(
        {"bootstrap.servers": served.broker.bootstrap, "group.id": "billing",
         "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )  # fmt: skip
    try:
        consumer.subscribe([orders])
        offsets: list[int | None] = []
        deadline = Deadline(WAIT_S)
        while len(offsets) < COMMITTED:
            assert not deadline.expired(), f"{len(offsets)} records read"
            message = consumer.poll(deadline.poll_timeout_s())
            if message is not None:
                assert message.error() is None, message.error()
                offsets.append(message.offset())
        assert offsets[:COMMITTED] == list(range(COMMITTED))
        consumer.commit(offsets=[ConfluentTopicPartition(orders, 0, COMMITTED)], asynchronous=False)
        text = served.scrape()
        assert sum(samples(text, "kshim_group_members", group="billing")) == 1
    finally:
        consumer.close()
    text = served.scrape()
    labels = {"group": "billing", "topic": orders, "partition": "0"}
    assert sample(text, "kshim_group_committed_offset", **labels) == COMMITTED
    assert sample(text, "kshim_group_lag", **labels) == RECORDS - COMMITTED
    assert sample(text, "kshim_fetched_bytes_total", topic=orders) > 0


def test_a_groups_lag_in_seconds_is_the_age_of_its_oldest_unread_record(served: Served) -> None:
    """The records carry a timestamp a minute old (CreateTime, as a capture that fell behind
    would have stamped them): the group behind reads as a minute behind, then 0 once it
    commits past the last one."""
    topic, group = "replica-changes", "replica"
    create_topic(served.broker.bootstrap, topic)
    minute_ago_ms = int(time.time() * 1000) - 60_000
    producer = Producer({"bootstrap.servers": served.broker.bootstrap, "acks": "all"})
    for index in range(3):
        producer.produce(topic, value=b"change", partition=0, timestamp=minute_ago_ms + index)
    assert producer.flush(WAIT_S) == 0
    consumer = Consumer({"bootstrap.servers": served.broker.bootstrap, "group.id": group})
    try:
        labels = {"group": group, "topic": topic, "partition": "0"}
        consumer.commit(offsets=[ConfluentTopicPartition(topic, 0, 1)], asynchronous=False)
        behind = sample(served.scrape(), "kshim_group_lag_seconds", **labels)
        assert 60 <= behind < 60 + WAIT_S * 3
        consumer.commit(offsets=[ConfluentTopicPartition(topic, 0, 3)], asynchronous=False)
        assert sample(served.scrape(), "kshim_group_lag_seconds", **labels) == 0
    finally:
        consumer.close()


def test_an_open_transaction_is_counted_until_it_commits(served: Served) -> None:
    topic, transactional_id = "payments", "metrics-txn"
    create_topic(served.broker.bootstrap, topic)
    producer = Producer(
        {"bootstrap.servers": served.broker.bootstrap, "transactional.id": transactional_id}
    )
    producer.init_transactions(WAIT_S)
    producer.begin_transaction()
    producer.produce(topic, value=b"open", partition=0)
    assert producer.flush(WAIT_S) == 0
    text = served.scrape()
    assert sample(text, "kshim_transactions_open") == 1
    age_s = sample(text, "kshim_transaction_open_seconds", transactional_id=transactional_id)
    assert 0 <= age_s < WAIT_S
    assert sample(text, "kshim_transactions_review_due") == 0
    producer.commit_transaction(WAIT_S)
    text = served.scrape()
    assert sample(text, "kshim_transactions_open") == 0
    assert samples(text, "kshim_transaction_open_seconds") == []


def test_delayed_records_are_pending_for_their_topic(served: Served, orders: str) -> None:
    due_ms = time.time_ns() // 1_000_000 + 3_600_000
    producer = Producer({"bootstrap.servers": served.broker.bootstrap, "acks": "all"})
    for index in range(5):
        producer.produce(f"{orders}.delay", value=f"later-{index}", partition=0,
                         headers=[("kshim-deliver-at", str(due_ms).encode())])  # fmt: skip
    assert producer.flush(WAIT_S) == 0
    text = wait_for_sample(served, "kshim_delayed_pending", 5, topic=orders)
    assert sample(text, "kshim_delayed_next_due_timestamp_seconds", topic=orders) == (
        pytest.approx(due_ms / 1000, abs=0.001)
    )
    assert sample(text, "kshim_produced_records_total", topic=f"{orders}.delay") == 5
    # Nothing delivered yet: the topic itself is as it was.
    assert sample(text, "kshim_log_high_watermark", topic=orders, partition="0") == RECORDS


def test_a_kept_full_data_view_catches_up(served: Served, orders: str) -> None:
    topic = "customers"
    create_topic(served.broker.bootstrap, topic, {"kshim.full.view": "true"})
    produce(served.broker.bootstrap, topic, 300)
    text = wait_for_sample(served, "kshim_full_view_lag_records", 0, topic=topic, partition="0")
    assert sample(text, "kshim_log_high_watermark", topic=topic, partition="0") == 300
    # The view is applied in a child process, which the process tree counts.
    assert sample(text, "kshim_process_tree_processes") >= 2
    # Nobody read orders.full and its config is the default: its view is not kept.
    assert samples(text, "kshim_full_view_lag_records", topic=orders) == []


def test_health_connections_process_tree_and_disk(served: Served) -> None:
    broker = served.broker
    assert broker.process is not None
    status, body = http_get(served.metrics_port, "/healthz")
    assert (status, body.splitlines()) == (
        200,
        [
            "ready",
            "node.id=1",
            f"pid={broker.process.pid}",
            f"data.dir={os.path.abspath(broker.data_dir)}",
            f"listeners=PLAINTEXT://{broker.bootstrap}",
        ],
    )
    status, _ = http_get(served.metrics_port, "/no-such-path")
    assert status == 404
    assert f"metrics on http://127.0.0.1:{served.metrics_port}/metrics" in broker.log_text()
    assert broker.process is not None
    assert listening_ports(broker.process.pid) == {broker.port, served.metrics_port}
    # The clients of the other tests are closed: their connections go, this one comes and goes.
    listener = {"listener": broker.bootstrap}
    wait_for_sample(served, "kshim_connections", 0, **listener)
    with connect(broker.bootstrap) as connection:
        wait_for_sample(served, "kshim_connections", 1, **listener)
        # A top-level error is counted under its name: a timeout above the broker's maximum.
        answer = connection.call(
            INIT_PRODUCER_ID, 1, {"transactional_id": "too-long", "transaction_timeout": 2**31 - 1}
        )
        assert answer.error_code == ErrorCode.invalid_transaction_timeout
    text = wait_for_sample(served, "kshim_connections", 0, **listener)
    assert sample(text, "kshim_requests_total", api="InitProducerId", version="1",
                  error="invalid_transaction_timeout") == 1  # fmt: skip
    assert sample(text, "kshim_process_tree_resident_memory_bytes") > 10 * 1024 * 1024
    assert sample(text, "kshim_process_tree_processes") >= 1
    assert sample(text, "kshim_process_tree_open_fds") > 0
    assert sample(text, "kshim_data_dir_free_bytes") > 0
    assert sample(text, "kshim_data_dir_size_bytes") == shutil.disk_usage(broker.data_dir).total


def test_an_empty_metrics_address_serves_nothing(tmp_path: Path) -> None:
    unused = free_port()
    broker = BrokerProcess(tmp_path / "data", settings=["kshim.metrics.listen="]).start()
    try:
        assert broker.process is not None
        assert listening_ports(broker.process.pid) == {broker.port}
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", unused), timeout=HTTP_TIMEOUT_S).close()
        log = broker.log_text()
        assert "metrics on http" not in log and "metrics not served" not in log
    finally:
        broker.stop()


def test_an_explicit_metrics_address_in_use_fails_serve(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        result = subprocess.run(
            serve_command(tmp_path / "data", f"127.0.0.1:{busy}"),
            capture_output=True, text=True, timeout=30, check=False,
            env={k: v for k, v in os.environ.items() if not k.startswith("KSHIM_")},
        )  # fmt: skip
    error = f"kshim: error: cannot serve metrics on 127.0.0.1:{busy}: address already in use"
    assert (result.returncode, result.stderr.splitlines()) == (1, [error]), result.stderr


def test_the_default_metrics_address_in_use_fails_serve_saying_what_to_do(
    tmp_path: Path,
) -> None:
    """A second broker on the machine would otherwise serve no metrics, and a readiness
    check of it would ask the first one's /healthz."""
    with socket.socket() as taken:
        try:
            taken.bind(("127.0.0.1", DEFAULT_METRICS_PORT))
        except OSError:
            pytest.skip(f"127.0.0.1:{DEFAULT_METRICS_PORT} is in use by another process")
        taken.listen()
        command = serve_command(tmp_path / "data", "unused")[:-2]  # the default address
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=30, check=False,
            env={k: v for k, v in os.environ.items() if not k.startswith("KSHIM_")},
        )  # fmt: skip
    error = (
        f"kshim: error: cannot serve metrics on 127.0.0.1:{DEFAULT_METRICS_PORT}: address "
        "already in use (another broker's? set kshim.metrics.listen to another address, or to "
        "nothing to serve no metrics)"
    )
    assert (result.returncode, result.stderr.splitlines()) == (1, [error]), result.stderr


def test_the_health_check_refuses_another_brokers_readiness(served: Served, tmp_path: Path) -> None:
    other = BrokerProcess(tmp_path / "data").start()  # serves no metrics
    url = f"http://127.0.0.1:{served.metrics_port}/healthz"
    try:
        ours = run_healthcheck(served.broker.bootstrap, url)
        theirs = run_healthcheck(other.bootstrap, url)
    finally:
        other.stop()
    assert ours.returncode == 0 and ours.stdout.endswith(", ready\n"), ours
    assert theirs.returncode == 1
    assert theirs.stderr.startswith(f"unhealthy: {url} is the readiness of another broker (pid "), (
        theirs.stderr
    )
    assert theirs.stderr.endswith(
        f"listening on PLAINTEXT://{served.broker.bootstrap}), not of the one on port "
        f"{other.port}\n"
    ), theirs.stderr


def run_healthcheck(bootstrap: str, url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kshim.healthcheck", bootstrap, url],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip


@pytest.mark.skipif(not ipv6_loopback(), reason="no IPv6 loopback here")
def test_an_ipv6_loopback_metrics_address_is_served(tmp_path: Path) -> None:
    port = free_port()
    with open(tmp_path / "serve.log", "wb") as log:
        command = serve_command(tmp_path / "data", f"[::1]:{port}")
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = Deadline(WAIT_S)
        while process.poll() is None and not deadline.expired():
            with contextlib.suppress(OSError), socket.create_connection(("::1", port), 0.5):
                break
            time.sleep(0.05)
        assert process.poll() is None, (tmp_path / "serve.log").read_text()
        status, body = http_get(port, "/healthz", host="[::1]")
        assert (status, body.splitlines()[0]) == (200, "ready")
    finally:
        stop_process(process)

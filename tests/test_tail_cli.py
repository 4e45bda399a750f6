"""``kshim tail`` as a user runs it: the real command (``python -m kshim tail``) in a child
process against a real ``kshim serve``, fed by confluent-kafka producers.

Records carry fixed timestamps, so every printed line can be compared whole. Every wait is
bounded; only processes started here are signalled.
"""

from __future__ import annotations

import base64
import json
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kshim.testing import BrokerProcess, failure_lines, stop_process

pytestmark = pytest.mark.timeout(180)

COMMAND_TIMEOUT_S = 60.0
WAIT_S = 30.0
BASE_TIME_MS = 1_700_000_000_000
BASE_TIME = "2023-11-14T22:13:20.000Z"  # BASE_TIME_MS in UTC


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for this module; each test uses topics of its own names."""
    process = BrokerProcess(tmp_path_factory.mktemp("tail") / "data").start()
    yield process
    process.stop()
    assert failure_lines(process.log_text()) == []


def kshim_tail(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kshim", "tail", *arguments],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )


def succeeded(*arguments: str) -> list[str]:
    result = kshim_tail(*arguments)
    assert (result.returncode, result.stderr) == (0, ""), result
    return result.stdout.splitlines()


def json_lines(*arguments: str) -> list[Any]:
    return [json.loads(line) for line in succeeded(*arguments, "--json")]


def new_topic(bootstrap: str, partitions: int = 1) -> str:
    topic = f"tailed-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=WAIT_S)
    return topic


def produce(
    bootstrap: str,
    topic: str,
    records: list[tuple[bytes | None, bytes | None]],
    partition: int = 0,
    compression: str = "lz4",
) -> None:
    """(key, value) records timestamped BASE_TIME_MS, in one batch (linger), compressed
    unless told otherwise."""
    settings = {"bootstrap.servers": bootstrap, "linger.ms": 50, "compression.type": compression}
    producer = Producer(settings)
    for key, value in records:
        producer.produce(topic, value, key, partition=partition, timestamp=BASE_TIME_MS)
    assert producer.flush(WAIT_S) == 0


def test_from_beginning_prints_the_first_records_and_stops_at_max_records(
    broker: BrokerProcess,
) -> None:
    bootstrap = broker.bootstrap
    topic = new_topic(bootstrap)
    produce(bootstrap, topic, [(f"k{n}".encode(), f"v{n}".encode()) for n in range(5)])

    # No --timeout-ms: only --max-records ends it.
    lines = succeeded(topic, "--bootstrap", bootstrap, "--from-beginning", "--max-records", "3")

    assert lines == [
        f"offset={n}\tpartition=0\ttimestamp={BASE_TIME}\tkey=k{n}\tvalue=v{n}\theaders="
        for n in range(3)
    ]


class Tail:
    """``kshim tail`` running in a child process, its output lines read by a thread."""

    def __init__(self, *arguments: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kshim", "tail", *arguments],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def next_line(self, timeout_s: float) -> str | None:
        try:
            return self.lines.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def finish(self) -> tuple[int, list[str], str]:
        """Waits for it to end by itself: (exit status, the lines not taken yet, stderr)."""
        status = self.process.wait(COMMAND_TIMEOUT_S)
        self._reader.join(WAIT_S)
        assert self.process.stderr is not None
        rest = []
        while not self.lines.empty():
            rest.append(self.lines.get())
        return status, rest, self.process.stderr.read()

    def stop(self) -> None:
        stop_process(self.process)  # type: ignore[arg-type]
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


def first_line_of_what_arrives(tail: Tail, bootstrap: str, topic: str) -> str:
    """The first line ``tail`` prints. It shows only what arrives once it has started, so
    this produces a record every half second until it shows one."""
    deadline = time.monotonic() + WAIT_S
    while True:
        assert time.monotonic() < deadline, "kshim tail showed nothing"
        produce(bootstrap, topic, [(None, b"new")], compression="none")
        line = tail.next_line(0.5)
        if line is not None:
            return line


def test_it_starts_at_the_end_and_follows_until_timeout_ms_without_a_record(
    broker: BrokerProcess,
) -> None:
    bootstrap = broker.bootstrap
    topic = new_topic(bootstrap)
    produce(bootstrap, topic, [(None, b"old-0"), (None, b"old-1")])
    timeout_ms = 2000
    tail = Tail(topic, "--bootstrap", bootstrap, "--timeout-ms", str(timeout_ms), "--json")
    try:
        first = first_line_of_what_arrives(tail, bootstrap, topic)
        produce(bootstrap, topic, [(None, b"last-1"), (None, b"last-2")])
        last_produced = time.monotonic()
        status, rest, stderr = tail.finish()
        quiet_s = time.monotonic() - last_produced
    finally:
        tail.stop()

    assert (status, stderr) == (0, "")
    shown = [json.loads(line) for line in [first, *rest]]
    offsets = [record["offset"] for record in shown]
    assert offsets[0] >= 2  # the records there before it started are not shown
    assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))
    assert [record["value"] for record in shown][-2:] == ["last-1", "last-2"]
    assert quiet_s >= timeout_ms / 1000 - 0.1  # it waited out the quiet time, not less


def test_ctrl_c_ends_following_quietly(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap
    topic = new_topic(bootstrap)
    tail = Tail(topic, "--bootstrap", bootstrap)  # no limit: it follows until stopped
    try:
        shown = first_line_of_what_arrives(tail, bootstrap, topic)
        tail.process.send_signal(signal.SIGINT)
        status, rest, stderr = tail.finish()
    finally:
        tail.stop()

    assert (status, stderr) == (0, "")
    assert shown.startswith("offset=") and "\tvalue=new\t" in shown
    assert all(line.startswith("offset=") for line in rest)


def test_full_shows_only_the_latest_value_of_each_key(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap
    topic = new_topic(bootstrap)
    updates = [(b"k1", b"a"), (b"k2", b"b"), (b"k1", b"c"), (b"k3", b"d"), (b"k2", b"e")]
    produce(bootstrap, topic, updates)
    arguments = ("--bootstrap", bootstrap, "--from-beginning", "--timeout-ms", "1500")

    log = json_lines(topic, *arguments)
    view = json_lines(topic, "--full", *arguments)

    assert [(record["key"], record["value"]) for record in log] == [
        (key.decode(), value.decode()) for key, value in updates
    ]
    assert [(record["offset"], record["key"], record["value"]) for record in view] == [
        (2, "k1", "c"),
        (3, "k3", "d"),
        (4, "k2", "e"),
    ]


def test_binary_keys_values_and_headers_are_hex_in_lines_and_base64_in_json(
    broker: BrokerProcess,
) -> None:
    bootstrap = broker.bootstrap
    topic = new_topic(bootstrap)
    key, value = b"\x00\xff\xfe", b"\xff\xfe\x00\x01"
    producer = Producer({"bootstrap.servers": bootstrap})
    headers = [("bin", b"\x80\x81"), ("txt", b"ok"), ("none", None)]
    producer.produce(topic, value, key, timestamp=BASE_TIME_MS, headers=headers)
    producer.produce(topic, "tab\tnew\nline é".encode(), None, timestamp=BASE_TIME_MS)
    assert producer.flush(WAIT_S) == 0
    arguments = (topic, "--bootstrap", bootstrap, "--from-beginning", "--max-records", "2")

    lines = succeeded(*arguments)
    records = json_lines(*arguments)

    assert lines == [
        f"offset=0\tpartition=0\ttimestamp={BASE_TIME}\tkey=0x00fffe\tvalue=0xfffe0001"
        "\theaders=bin:0x8081,txt:ok,none:null",
        f"offset=1\tpartition=0\ttimestamp={BASE_TIME}\tkey=null\tvalue=tab\\tnew\\nline é"
        "\theaders=",
    ]
    assert records[0] == {
        "partition": 0,
        "offset": 0,
        "timestamp": BASE_TIME_MS,
        "key": {"base64": base64.b64encode(key).decode()},
        "value": {"base64": base64.b64encode(value).decode()},
        "headers": [
            {"key": "bin", "value": {"base64": base64.b64encode(b"\x80\x81").decode()}},
            {"key": "txt", "value": "ok"},
            {"key": "none", "value": None},
        ],
    }
    assert (records[1]["key"], records[1]["value"]) == (None, "tab\tnew\nline é")


def test_only_committed_records_are_shown(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap
    topic = new_topic(bootstrap)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic})
    producer.init_transactions(WAIT_S)
    for outcome in ("abort", "commit", "abort", "commit"):
        producer.begin_transaction()
        for n in range(2):
            producer.produce(topic, f"{outcome}-{n}".encode())
        if outcome == "abort":
            producer.flush(WAIT_S)  # stored, then aborted: Fetch returns them, marked aborted
            producer.abort_transaction(WAIT_S)
        else:
            producer.commit_transaction(WAIT_S)

    records = json_lines(
        topic, "--bootstrap", bootstrap, "--from-beginning", "--timeout-ms", "1500"
    )

    # Each transaction ends with its marker, an offset of its own that is never shown.
    assert offsets_and_values(records) == [
        (3, "commit-0"),
        (4, "commit-1"),
        (9, "commit-0"),
        (10, "commit-1"),
    ]


def offsets_and_values(records: list[dict[str, Any]]) -> list[tuple[int, Any]]:
    return [(record["offset"], record["value"]) for record in records]


def test_partition_reads_only_that_partition(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap
    topic = new_topic(bootstrap, partitions=2)
    produce(bootstrap, topic, [(None, b"zero")], partition=0)
    produce(bootstrap, topic, [(None, b"one-a"), (None, b"one-b")], partition=1)
    arguments = (topic, "--bootstrap", bootstrap, "--from-beginning", "--timeout-ms", "1500")

    everything = json_lines(*arguments)
    one = json_lines(*arguments, "--partition", "1")

    assert sorted((r["partition"], r["value"]) for r in everything) == [
        (0, "zero"),
        (1, "one-a"),
        (1, "one-b"),
    ]
    assert [(r["partition"], r["offset"], r["value"]) for r in one] == [
        (1, 0, "one-a"),
        (1, 1, "one-b"),
    ]


def test_an_unknown_topic_or_partition_is_one_error_line(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap
    topic = new_topic(bootstrap)
    unknown_topic = kshim_tail("no-such-topic", "--bootstrap", bootstrap, "--timeout-ms", "100")
    unknown_partition = kshim_tail(topic, "--bootstrap", bootstrap, "--partition", "3")
    for result, line in (
        (unknown_topic, "cannot read topic no-such-topic: UNKNOWN_TOPIC_OR_PARTITION"),
        (unknown_partition, f"topic {topic} has no partition 3"),
    ):
        assert "Traceback" not in result.stderr, result.stderr
        assert (result.returncode, result.stdout) == (1, "")
        assert result.stderr.splitlines() == [f"kshim tail: error: {line}"]


def test_a_command_config_that_cannot_be_used_is_refused(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    config = tmp_path / "consumer.properties"
    config.write_text("security.protocol=SASL_SSL\n", encoding="utf-8")
    result = kshim_tail("any", "--bootstrap", broker.bootstrap, "--command-config", str(config))
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.splitlines() == [
        f"kshim tail: error: --command-config {config}: security.protocol=SASL_SSL needs "
        "sasl.mechanism: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (Kafka's default, GSSAPI, is "
        "not supported)"
    ]

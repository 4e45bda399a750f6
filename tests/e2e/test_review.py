"""Half messages and review: a producer that begins a transaction, writes and dies.

The dying producer is a confluent-kafka producer in a child process, killed with SIGKILL
once its records are acknowledged: its transaction stays Ongoing on the broker, the
records persisted but invisible to read_committed readers. The broker then asks the
review hook (kshim/broker/transactions/reviewer.py) when the transaction times out, or
when a new instance with the same transactional.id calls InitProducerId, and the answer
decides it; without a hook it is aborted, as in Kafka. The hooks are scripted through
files (tests/e2e/review_hooks.py) or served over HTTP by a server in this process, and
every request they receive is checked: transactional id, producer id and epoch, reason,
and the first and last offsets written per partition.

The dying producer writes r0-r2 to partition 0 and r3-r4 to partition 1, so a decided
transaction leaves its marker at offset 3 and 2 respectively (docs/protocol-notes.md §5.2).
Brokers here review every 100 ms, ask again 300 ms after ``unknown`` and give up after
three reviews; the dying producer's transaction.timeout.ms is 2 s.
"""

from __future__ import annotations

import contextlib
import json
import select
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from kshim.client.wire import connect
from kshim.testing import BrokerProcess, free_port
from tests.e2e.client_helpers import unique_topic
from tests.e2e.review_hooks import DIRECTORY_VARIABLE, recorded_calls, set_answers
from tests.e2e.test_transactions import (
    CLIENTS,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    Record,
    TransactionView,
    create_topic,
    describe_transaction,
    raw_latest_offset,
    read_partition,
    transactional_producer,
)

pytestmark = pytest.mark.timeout(90)

REPO_ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 20.0
TIMEOUT_MS = 2000  # the dying producer's transaction.timeout.ms, when it should time out
LONG_TIMEOUT_MS = 60_000  # ... and when a new instance must decide before the timeout
MAX_CHECKS = 3
REVIEW_SETTINGS = [
    "kshim.review.retry.ms=300",
    "kshim.review.check.interval.ms=100",
    f"kshim.review.max.checks={MAX_CHECKS}",
]
CALLABLE_HOOK = "kshim.review.hook=tests.e2e.review_hooks:decide"
END_TXN = 26
INVALID_PRODUCER_EPOCH, PRODUCER_FENCED = 47, 90

# What the dying producer writes, per partition; the marker follows each.
WRITTEN: dict[int, list[Record]] = {
    0: [(0, b"r0"), (1, b"r1"), (2, b"r2")],
    1: [(0, b"r3"), (1, b"r4")],
}
END_OFFSETS = {0: 4, 1: 3}

DYING_PRODUCER = """
import sys, time
from confluent_kafka import Producer
bootstrap, topic, transactional_id, timeout_ms = sys.argv[1:5]
producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                     "transaction.timeout.ms": int(timeout_ms), "linger.ms": 5})
producer.init_transactions(20)
producer.begin_transaction()
for partition, values in ((0, [b"r0", b"r1", b"r2"]), (1, [b"r3", b"r4"])):
    for value in values:
        producer.produce(topic, value=value, partition=partition)
assert producer.flush(20) == 0
print("written", flush=True)
time.sleep(600)
"""


# --------------------------------------------------------------------------------------
# Brokers, hooks and the dying producer
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def hooks_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The directory the callable hook reads and writes; brokers inherit its variable."""
    directory = tmp_path_factory.mktemp("review-hooks")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(DIRECTORY_VARIABLE, str(directory))
        yield directory


@pytest.fixture(scope="module")
def review_broker(
    tmp_path_factory: pytest.TempPathFactory, hooks_dir: Path
) -> Iterator[BrokerProcess]:
    """A broker whose review hook is ``review_hooks.decide``; tests use their own ids."""
    data = tmp_path_factory.mktemp("review") / "data"
    broker = BrokerProcess(data, settings=[CALLABLE_HOOK, *REVIEW_SETTINGS]).start()
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def hookless_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("hookless") / "data"
    broker = BrokerProcess(data, settings=REVIEW_SETTINGS).start()
    yield broker
    broker.stop()


def dying_producer(
    broker: BrokerProcess, topic: str, transactional_id: str, timeout_ms: int
) -> None:
    """Begins a transaction, writes r0-r4, and dies (SIGKILL) once they are acknowledged."""
    command = [sys.executable, "-c", DYING_PRODUCER, broker.bootstrap, topic, transactional_id,
               str(timeout_ms)]  # fmt: skip
    process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], WAIT_S)
        assert ready and process.stdout.readline().strip() == "written", "producer never wrote"
    finally:
        process.kill()
        process.wait(WAIT_S)


def wait_for(condition: Callable[[], Any], what: str, timeout_s: float = WAIT_S) -> Any:
    """Returns the first truthy value of ``condition``; fails after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not (value := condition()):
        assert time.monotonic() < deadline, f"timed out after {timeout_s} s waiting for {what}"
        time.sleep(0.05)
    return value


def wait_decided(broker: BrokerProcess, transactional_id: str) -> TransactionView:
    def decided() -> TransactionView | None:
        view = describe_transaction(broker, transactional_id)
        return view if view.state in ("CompleteCommit", "CompleteAbort") else None

    view: TransactionView = wait_for(decided, f"{transactional_id} to be decided")
    return view


def expected_request(
    transactional_id: str, open_view: TransactionView, topic: str, reason: str, reviews: int
) -> dict[str, Any]:
    """The review request the hook must receive for the dying producer's transaction."""
    return {
        "transactional_id": transactional_id,
        "producer_id": open_view.producer_id,
        "producer_epoch": open_view.producer_epoch,
        "reason": reason,
        "reviews": reviews,
        "partitions": [
            {"topic": topic, "partition": 0, "first_offset": 0, "last_offset": 2},
            {"topic": topic, "partition": 1, "first_offset": 0, "last_offset": 1},
        ],
    }


def comparable(request: dict[str, Any]) -> dict[str, Any]:
    """A received request without its start time, partitions in order."""
    partitions = sorted(request["partitions"], key=lambda entry: entry["partition"])
    return {key: value for key, value in request.items() if key != "started_ms"} | {
        "partitions": partitions
    }


def assert_outcome(broker: BrokerProcess, topic: str, committed: bool) -> None:
    """Exactly the dying producer's records, visible to read_committed readers iff committed."""
    for partition, written in WRITTEN.items():
        end = END_OFFSETS[partition]
        visible = written if committed else []
        assert read_partition("confluent", broker.bootstrap, topic, partition, READ_COMMITTED) == (
            visible,
            end,
        )
        assert read_partition(
            "confluent", broker.bootstrap, topic, partition, READ_UNCOMMITTED
        ) == (written, end)


def assert_undecided(broker: BrokerProcess, topic: str, transactional_id: str) -> None:
    assert describe_transaction(broker, transactional_id).state == "Ongoing"
    for partition, end in END_OFFSETS.items():
        assert raw_latest_offset(broker, topic, partition, READ_COMMITTED) == 0
        assert raw_latest_offset(broker, topic, partition, READ_UNCOMMITTED) == end - 1


def start_open_transaction(
    broker: BrokerProcess, label: str, timeout_ms: int
) -> tuple[str, str, TransactionView]:
    """(topic, transactional id, view of the open transaction) after the producer died."""
    topic = create_topic(broker.bootstrap, label, partitions=2)
    transactional_id = unique_topic(label)
    dying_producer(broker, topic, transactional_id, timeout_ms)
    view = describe_transaction(broker, transactional_id)
    assert (view.state, view.partitions) == ("Ongoing", {topic: [0, 1]})
    return topic, transactional_id, view


# --------------------------------------------------------------------------------------
# Timeout reviews
# --------------------------------------------------------------------------------------

DECISIONS = {"commit": ("commit", True), "abort": ("abort", False),
             "unknown-then-commit": ("unknown,commit", True)}  # fmt: skip


@pytest.mark.parametrize("decision", DECISIONS)
def test_hook_decides_a_timed_out_transaction(
    decision: str, review_broker: BrokerProcess, hooks_dir: Path
) -> None:
    answers, committed = DECISIONS[decision]
    label = f"review-{decision}"
    topic = create_topic(review_broker.bootstrap, label, partitions=2)
    transactional_id = unique_topic(label)
    set_answers(hooks_dir, transactional_id, answers)
    started_ms = int(time.time() * 1000)
    dying_producer(review_broker, topic, transactional_id, TIMEOUT_MS)
    open_view = describe_transaction(review_broker, transactional_id)
    assert open_view.state == "Ongoing"

    decided = wait_decided(review_broker, transactional_id)
    assert decided.state == ("CompleteCommit" if committed else "CompleteAbort")
    # The decision fenced the dead producer's epoch.
    assert (decided.producer_id, decided.producer_epoch) == (
        open_view.producer_id,
        open_view.producer_epoch + 1,
    )
    calls = recorded_calls(hooks_dir, transactional_id)
    count = len(answers.split(","))
    assert [comparable(call) for call in calls] == [
        expected_request(transactional_id, open_view, topic, "timeout", reviews)
        for reviews in range(count)
    ]
    assert {call["started_ms"] for call in calls} == {calls[0]["started_ms"]}
    assert started_ms <= calls[0]["started_ms"] <= int(time.time() * 1000)
    assert_outcome(review_broker, topic, committed)


def test_timed_out_transaction_is_aborted_without_a_hook(hookless_broker: BrokerProcess) -> None:
    topic, transactional_id, open_view = start_open_transaction(
        hookless_broker, "no-hook", TIMEOUT_MS
    )
    decided = wait_decided(hookless_broker, transactional_id)
    assert (decided.state, decided.producer_epoch) == (
        "CompleteAbort",
        open_view.producer_epoch + 1,
    )
    assert_outcome(hookless_broker, topic, committed=False)


class RecordingHookServer(ThreadingHTTPServer):
    """An HTTP review hook: answers from a script (the last repeats), records every request."""

    def __init__(self, responses: list[tuple[int, bytes]]) -> None:
        super().__init__(("127.0.0.1", 0), HookHandler)
        self.responses = responses
        self.received: list[tuple[str, str, dict[str, Any]]] = []  # (path, content type, body)
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/review"


class HookHandler(BaseHTTPRequestHandler):
    server: RecordingHookServer

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            self.server.received.append((self.path, self.headers["Content-Type"], body))
            index = min(len(self.server.received), len(self.server.responses)) - 1
            status, answer = self.server.responses[index]
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # no request lines on stderr


@contextlib.contextmanager
def serving(responses: list[tuple[int, bytes]]) -> Iterator[RecordingHookServer]:
    server = RecordingHookServer(responses)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(WAIT_S)


def test_http_hook_decides_after_a_failed_call(tmp_path: Path) -> None:
    # A server error and an answer the broker does not know both count as unknown.
    responses = [(500, b'{"error": "database down"}'), (200, b'{"decision": "maybe"}'),
                 (200, b'{"decision": "commit"}')]  # fmt: skip
    with serving(responses) as server:
        settings = [f"kshim.review.hook={server.url}", *REVIEW_SETTINGS]
        broker = BrokerProcess(tmp_path / "data", settings=settings).start()
        try:
            topic, transactional_id, open_view = start_open_transaction(
                broker, "http-hook", TIMEOUT_MS
            )
            assert wait_decided(broker, transactional_id).state == "CompleteCommit"
            assert_outcome(broker, topic, committed=True)
        finally:
            broker.stop()
    assert [(path, content_type) for path, content_type, _ in server.received] == [
        ("/review", "application/json")
    ] * 3
    assert [comparable(body) for _, _, body in server.received] == [
        expected_request(transactional_id, open_view, topic, "timeout", reviews)
        for reviews in range(3)
    ]


def test_review_gives_up_after_max_checks(review_broker: BrokerProcess, hooks_dir: Path) -> None:
    # An exception in the hook and an unknown word count as unknown too.
    topic = create_topic(review_broker.bootstrap, "give-up", partitions=2)
    transactional_id = unique_topic("give-up")
    set_answers(hooks_dir, transactional_id, "unknown,raise,maybe")
    dying_producer(review_broker, topic, transactional_id, TIMEOUT_MS)
    open_view = describe_transaction(review_broker, transactional_id)

    assert wait_decided(review_broker, transactional_id).state == "CompleteAbort"
    calls = recorded_calls(hooks_dir, transactional_id)
    assert [comparable(call) for call in calls] == [
        expected_request(transactional_id, open_view, topic, "timeout", reviews)
        for reviews in range(MAX_CHECKS)
    ]
    alarm = f"ALARM: transaction {transactional_id} undecided after {MAX_CHECKS} reviews"
    assert alarm in review_broker.log_text()
    assert_outcome(review_broker, topic, committed=False)


def test_an_undecided_transaction_raises_an_alarm_in_log_metrics_and_webhook(
    tmp_path: Path,
) -> None:
    # The hook never decides; after the last review the broker aborts the transaction and
    # says so three ways: the ALARM line, the metric, and a POST to the alarm webhook.
    metrics_port = free_port()
    with serving([(200, b'{"decision": "unknown"}')]) as hook, serving([(200, b"")]) as webhook:
        settings = [
            f"kshim.review.hook={hook.url}", *REVIEW_SETTINGS,
            f"kshim.alarm.webhook={webhook.url}",
            f"kshim.metrics.listen=127.0.0.1:{metrics_port}",
        ]  # fmt: skip
        broker = BrokerProcess(tmp_path / "data", settings=settings).start()
        try:
            topic, transactional_id, _ = start_open_transaction(broker, "alarm", TIMEOUT_MS)
            assert wait_decided(broker, transactional_id).state == "CompleteAbort"
            assert_outcome(broker, topic, committed=False)
            wait_for(lambda: webhook.received, "the alarm's POST")
            scrape = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10)
            metrics = scrape.read().decode()
            log_text = broker.log_text()
        finally:
            broker.stop()
    alarm = f"ALARM: transaction {transactional_id} undecided after {MAX_CHECKS} reviews"
    assert alarm in log_text
    assert f"kind=transaction_undecided subject={transactional_id}" in log_text
    assert 'kshim_alarms_raised_total{kind="transaction_undecided"} 1.0' in metrics.splitlines()
    reviews = f'kshim_transaction_reviews_total{{outcome="unknown"}} {float(MAX_CHECKS)}'
    assert reviews in metrics.splitlines()
    [(path, content_type, body)] = webhook.received
    assert (path, content_type) == ("/review", "application/json")
    assert {key: body[key] for key in ("kind", "subject", "value", "threshold", "state")} == {
        "kind": "transaction_undecided", "subject": transactional_id, "value": MAX_CHECKS,
        "threshold": MAX_CHECKS, "state": "happened",
    }  # fmt: skip


# --------------------------------------------------------------------------------------
# A new instance with the same transactional.id, before the timeout
# --------------------------------------------------------------------------------------

NEW_INSTANCE_CASES = {
    "commit": ("commit", True, "confluent"),
    "abort": ("abort", False, "confluent"),
    **{f"unknown-then-commit-{client}": ("unknown,commit", True, client) for client in CLIENTS},
    "no-hook": ("", False, "confluent"),
}


@pytest.mark.parametrize("case", NEW_INSTANCE_CASES)
def test_new_instance_waits_for_the_review(
    case: str, review_broker: BrokerProcess, hookless_broker: BrokerProcess, hooks_dir: Path
) -> None:
    answers, committed, client = NEW_INSTANCE_CASES[case]
    broker = review_broker if answers else hookless_broker
    topic = create_topic(broker.bootstrap, "new-instance", partitions=2)
    transactional_id = unique_topic("new-instance")
    if answers:
        set_answers(hooks_dir, transactional_id, answers)
    dying_producer(broker, topic, transactional_id, LONG_TIMEOUT_MS)
    open_view = describe_transaction(broker, transactional_id)
    assert open_view.state == "Ongoing"

    successor = transactional_producer(client, broker.bootstrap, transactional_id)
    try:
        # InitProducerId was answered only once the review decided: no waiting here.
        for partition, end in END_OFFSETS.items():
            assert raw_latest_offset(broker, topic, partition, READ_COMMITTED) == end
        view = describe_transaction(broker, transactional_id)
        assert (view.state, view.producer_epoch) == ("Empty", open_view.producer_epoch + 2)
        successor.begin()
        successor.send(topic, 0, b"new")  # offset 4, its COMMIT marker at 5
        successor.flush()
        successor.commit()
    finally:
        successor.close()

    calls = recorded_calls(hooks_dir, transactional_id)
    if answers:
        count = len(answers.split(","))
        assert len(calls) == count
        # The first review is the new instance's; a later one may come from either path.
        assert comparable(calls[0]) == expected_request(
            transactional_id, open_view, topic, "new producer instance", 0
        )
        assert [call["reviews"] for call in calls] == list(range(count))
    else:
        assert calls == []
    committed_p0 = WRITTEN[0] if committed else []
    assert read_partition("confluent", broker.bootstrap, topic, 0, READ_COMMITTED) == (
        [*committed_p0, (4, b"new")],
        6,
    )
    assert read_partition("confluent", broker.bootstrap, topic, 1, READ_COMMITTED) == (
        WRITTEN[1] if committed else [],
        END_OFFSETS[1],
    )


# --------------------------------------------------------------------------------------
# The outcome stands: across restarts, against late requests from the old epoch
# --------------------------------------------------------------------------------------


def test_outcome_survives_restart_mid_review(tmp_path: Path, hooks_dir: Path) -> None:
    # Reviews a second apart, so the kill lands between two of them, never inside one
    # (a call the hook recorded but the broker did not live to count).
    settings = ["kshim.review.hook=tests.e2e.review_hooks:decide_async", *REVIEW_SETTINGS,
                "kshim.review.retry.ms=1000", "kshim.review.max.checks=100"]  # fmt: skip
    broker = BrokerProcess(tmp_path / "data", settings=settings).start()
    try:
        topic = create_topic(broker.bootstrap, "restart-review", partitions=2)
        transactional_id = unique_topic("restart-review")
        set_answers(hooks_dir, transactional_id, "unknown")
        dying_producer(broker, topic, transactional_id, TIMEOUT_MS)
        open_view = describe_transaction(broker, transactional_id)
        wait_for(lambda: len(recorded_calls(hooks_dir, transactional_id)) == 2, "two reviews")
        time.sleep(0.2)  # the broker persists the review count right after the answer
        assert_undecided(broker, topic, transactional_id)

        broker.kill()
        asked_before = len(recorded_calls(hooks_dir, transactional_id))
        assert asked_before == 2
        set_answers(hooks_dir, transactional_id, "commit")
        broker.start()
        decided = wait_decided(broker, transactional_id)
        assert decided.state == "CompleteCommit"
        calls = recorded_calls(hooks_dir, transactional_id)
        # The review count survived the restart: the deciding call continues it.
        assert [call["reviews"] for call in calls] == list(range(asked_before + 1))
        assert comparable(calls[-1]) == expected_request(
            transactional_id, open_view, topic, "timeout", asked_before
        )
        assert_outcome(broker, topic, committed=True)

        broker.kill()  # and the decision itself is durable
        broker.start()
        assert describe_transaction(broker, transactional_id) == decided
        assert_outcome(broker, topic, committed=True)
    finally:
        broker.stop()


@pytest.mark.parametrize(("version", "error"), [(0, INVALID_PRODUCER_EPOCH), (3, PRODUCER_FENCED)])
def test_late_end_txn_cannot_change_a_committed_outcome(
    version: int, error: int, review_broker: BrokerProcess, hooks_dir: Path
) -> None:
    # Kafka answers fencing with PRODUCER_FENCED from EndTxn v2 on, INVALID_PRODUCER_EPOCH
    # before (KIP-588): older clients (aiokafka) only understand the latter.
    topic = create_topic(review_broker.bootstrap, "late-end", partitions=2)
    transactional_id = unique_topic("late-end")
    set_answers(hooks_dir, transactional_id, "commit")
    dying_producer(review_broker, topic, transactional_id, TIMEOUT_MS)
    open_view = describe_transaction(review_broker, transactional_id)
    decided = wait_decided(review_broker, transactional_id)
    assert decided.state == "CompleteCommit"

    with connect(review_broker.bootstrap) as connection:
        for committed in (False, True):
            response = connection.call(END_TXN, version, {
                "transactional_id": transactional_id,
                "producer_id": open_view.producer_id,
                "producer_epoch": open_view.producer_epoch,
                "committed": committed,
            })  # fmt: skip
            assert response.error_code == error
    assert describe_transaction(review_broker, transactional_id) == decided
    assert_outcome(review_broker, topic, committed=True)


def test_stalled_producer_cannot_abort_after_review_committed(
    review_broker: BrokerProcess, hooks_dir: Path
) -> None:
    topic = create_topic(review_broker.bootstrap, "stalled", partitions=2)
    transactional_id = unique_topic("stalled")
    set_answers(hooks_dir, transactional_id, "commit")
    producer = Producer({"bootstrap.servers": review_broker.bootstrap,
                         "transactional.id": transactional_id,
                         "transaction.timeout.ms": TIMEOUT_MS, "linger.ms": 5})  # fmt: skip
    producer.init_transactions(WAIT_S)
    producer.begin_transaction()
    for partition, written in WRITTEN.items():
        for _, value in written:
            producer.produce(topic, value=value, partition=partition)
    assert producer.flush(WAIT_S) == 0
    # The producer stalls past its timeout; the review commits and fences it.
    decided = wait_decided(review_broker, transactional_id)
    assert decided.state == "CompleteCommit"

    with pytest.raises(KafkaException) as raised:
        producer.abort_transaction(WAIT_S)
    assert raised.value.args[0].code() == KafkaError._FENCED
    assert describe_transaction(review_broker, transactional_id) == decided
    assert_outcome(review_broker, topic, committed=True)

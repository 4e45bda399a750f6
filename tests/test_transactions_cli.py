"""``kshim transactions`` as a user runs it: the real command (``python -m kshim
transactions``) in a child process, its tables, its ``--json`` lines and its one-line
errors.

Against a real ``kshim serve`` (node.id 7, so the coordinator column comes from the
broker's answer) with transactions left open by confluent-kafka transactional producers:
list, describe, find-hanging (an open transaction its coordinator still lists is not
hanging, as in Kafka's tool) and abort (kshim serves no WriteTxnMarkers, so it fails and
changes nothing). What kshim never answers, a hanging transaction and a broker that serves
WriteTxnMarkers, is answered by a scripted Kafka-protocol peer (tests/scripted_broker.py).
Every wait is bounded; only processes started here are signalled.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Message, Producer

from kshim.testing import BrokerProcess, failure_lines, free_port
from tests.scripted_broker import ScriptedBroker

COMMAND = [sys.executable, "-m", "kshim", "transactions"]
COMMAND_TIMEOUT_S = 60.0
CLIENT_TIMEOUT_S = 30.0
NODE_ID = 7
BROKER_PARTITIONS = 2
TINY_TIMEOUT_MINUTES = "0.001"  # 60 ms
TINY_TIMEOUT_S = 0.06
PROGRAM = "kshim transactions"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for this module; each test uses transactional ids and topics of its own."""
    settings = [f"node.id={NODE_ID}", f"num.partitions={BROKER_PARTITIONS}"]
    process = BrokerProcess(tmp_path_factory.mktemp("transactions") / "data", settings).start()
    yield process
    process.stop()
    assert failure_lines(process.log_text()) == []


def kshim_transactions(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*COMMAND, *arguments],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )


def succeeded(*arguments: str) -> list[str]:
    """The lines the command printed; fails the test unless it exited 0 and said nothing
    on stderr."""
    result = kshim_transactions(*arguments)
    assert (result.returncode, result.stderr) == (0, ""), result
    return result.stdout.splitlines()


def json_lines(*arguments: str) -> list[Any]:
    return [json.loads(line) for line in succeeded(*arguments, "--json")]


def rows(lines: list[str]) -> list[list[str]]:
    """A table's rows below its header, split into cells (no cell here has a space)."""
    return [line.split() for line in lines[1:]]


def assert_one_error_line(result: subprocess.CompletedProcess[str], status: int, line: str) -> None:
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stderr.splitlines() == [line]
    assert result.stdout == ""
    assert result.returncode == status


@contextlib.contextmanager
def transactional_producer(
    broker: BrokerProcess, transactional_id: str, **settings: Any
) -> Iterator[Producer]:
    """A confluent-kafka producer with its transactions initialised; closed after."""
    config = {"bootstrap.servers": broker.bootstrap, "transactional.id": transactional_id}
    producer = Producer({**config, **settings})
    try:
        producer.init_transactions(CLIENT_TIMEOUT_S)
        yield producer
    finally:
        producer.close()


def begin_and_write(producer: Producer, topic: str, partition: int, count: int = 1) -> None:
    """Begins a transaction and writes ``count`` records to one partition, flushed and
    acknowledged, but neither committed nor aborted."""
    producer.begin_transaction()
    write(producer, topic, partition, count)


def write(producer: Producer, topic: str, partition: int, count: int = 1) -> None:
    """Writes ``count`` records to one partition in the transaction under way, flushed and
    acknowledged."""
    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, _: Message) -> None:
        if error is not None:
            failures.append(error)

    for index in range(count):
        producer.produce(
            topic, f"record {index}".encode(), partition=partition, on_delivery=delivered
        )
    assert producer.flush(CLIENT_TIMEOUT_S) == 0
    assert failures == []


def listed(broker: BrokerProcess) -> dict[str, Any]:
    return {
        row["transactional_id"]: row for row in json_lines("list", "--bootstrap", broker.bootstrap)
    }


# Against kshim


def test_list_shows_an_open_transaction_ongoing_then_complete_commit(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap
    with transactional_producer(broker, "tx-list") as producer:
        begin_and_write(producer, "list-orders", partition=1)

        [row] = [
            row for row in rows(succeeded("list", "--bootstrap", bootstrap)) if row[0] == "tx-list"
        ]
        producer_id = row[2]
        assert row == ["tx-list", str(NODE_ID), producer_id, "Ongoing"]
        assert succeeded("list", "--bootstrap", bootstrap)[0].split() == [
            "TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "STATE"
        ]  # fmt: skip
        assert listed(broker)["tx-list"] == {
            "transactional_id": "tx-list",
            "coordinator": NODE_ID,
            "producer_id": int(producer_id),
            "state": "Ongoing",
        }

        producer.commit_transaction(CLIENT_TIMEOUT_S)

    assert listed(broker)["tx-list"]["state"] == "CompleteCommit"


def test_list_filters_by_state_and_producer_id(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap
    with (
        transactional_producer(broker, "tx-filter-open") as open_producer,
        transactional_producer(broker, "tx-filter-done") as done_producer,
    ):
        begin_and_write(open_producer, "filter-orders", partition=0)
        begin_and_write(done_producer, "filter-orders", partition=1)
        done_producer.commit_transaction(CLIENT_TIMEOUT_S)

        def ids(*filters: str) -> set[str]:
            listings = json_lines("list", "--bootstrap", bootstrap, *filters)
            return {row["transactional_id"] for row in listings} & {
                "tx-filter-open", "tx-filter-done"
            }  # fmt: skip

        assert ids() == {"tx-filter-open", "tx-filter-done"}
        assert ids("--state", "Ongoing") == {"tx-filter-open"}
        assert ids("--state", "completecommit") == {"tx-filter-done"}  # any case
        assert ids("--state", "Ongoing", "CompleteCommit") == {"tx-filter-open", "tx-filter-done"}
        assert ids("--state", "PrepareAbort") == set()
        done_id = listed(broker)["tx-filter-done"]["producer_id"]
        assert ids("--producer-id", str(done_id)) == {"tx-filter-done"}

        open_producer.abort_transaction(CLIENT_TIMEOUT_S)


def test_describe_shows_state_producer_timeout_start_and_partitions(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap
    with transactional_producer(
        broker, "tx-described", **{"transaction.timeout.ms": 45000}
    ) as producer:
        before_ms = int(time.time() * 1000)
        begin_and_write(producer, "described-orders", partition=1)
        write(producer, "described-audit", partition=0)
        after_ms = int(time.time() * 1000)
        arguments = ("describe", "--bootstrap", bootstrap, "--transactional-id", "tx-described")

        [described] = json_lines(*arguments)
        producer_id = listed(broker)["tx-described"]["producer_id"]
        assert described["coordinator"] == NODE_ID
        assert described["transactional_id"] == "tx-described"
        assert (described["producer_id"], described["producer_epoch"]) == (producer_id, 0)
        assert described["state"] == "Ongoing"
        assert described["timeout_ms"] == 45000
        assert before_ms - 1000 <= described["start_time_ms"] <= after_ms + 1000
        assert 0 <= described["duration_ms"] < COMMAND_TIMEOUT_S * 1000
        assert sorted(
            (partition["topic"], partition["partition"]) for partition in described["partitions"]
        ) == [("described-audit", 0), ("described-orders", 1)]

        header, row = succeeded(*arguments)
        assert header.split() == [
            "COORDINATOR", "TRANSACTIONAL-ID", "PRODUCER-ID", "PRODUCER-EPOCH", "STATE",
            "TIMEOUT-MS", "START-TIME-MS", "DURATION-MS", "TOPIC-PARTITIONS",
        ]  # fmt: skip
        cells = row.split()
        assert cells[:6] == [
            str(NODE_ID),
            "tx-described",
            str(producer_id),
            "0",
            "Ongoing",
            "45000",
        ]
        assert cells[6] == str(described["start_time_ms"])
        assert sorted(cells[8].split(",")) == ["described-audit-0", "described-orders-1"]

        producer.commit_transaction(CLIENT_TIMEOUT_S)

    [committed] = json_lines(*arguments)
    assert committed["state"] == "CompleteCommit"
    assert committed["partitions"] == []


def test_describe_before_any_transaction_has_no_start_time(broker: BrokerProcess) -> None:
    """An initialised producer's id is Empty, with the start time -1 on the wire."""
    arguments = ("describe", "--bootstrap", broker.bootstrap, "--transactional-id", "tx-idle")
    with transactional_producer(broker, "tx-idle"):
        [described] = json_lines(*arguments)
        assert described["state"] == "Empty"
        assert (described["start_time_ms"], described["duration_ms"]) == (None, None)
        assert described["partitions"] == []
        [cells] = rows(succeeded(*arguments))
        assert cells[4:] == ["Empty", "60000", "-", "-", "-"]


def test_describing_an_unknown_transactional_id_is_one_error_line(broker: BrokerProcess) -> None:
    result = kshim_transactions(
        "describe", "--bootstrap", broker.bootstrap, "--transactional-id", "never-used"
    )
    assert_one_error_line(
        result,
        1,
        f"{PROGRAM}: error: cannot describe transactional id never-used: "
        "TRANSACTIONAL_ID_NOT_FOUND",
    )


def test_find_hanging_does_not_report_a_transaction_its_coordinator_still_lists(
    broker: BrokerProcess,
) -> None:
    """Kafka's definition: however old, an open transaction whose coordinator lists its
    partition is still owed a marker, so it is not hanging."""
    bootstrap = broker.bootstrap
    arguments = ("find-hanging", "--bootstrap", bootstrap, "--topic", "owed-orders")
    with transactional_producer(broker, "tx-owed") as producer:
        begin_and_write(producer, "owed-orders", partition=0)
        time.sleep(TINY_TIMEOUT_S * 2)
        tiny = ("--max-transaction-timeout", TINY_TIMEOUT_MINUTES)

        assert succeeded(*arguments, *tiny) == [
            "TOPIC  PARTITION  PRODUCER-ID  PRODUCER-EPOCH  COORDINATOR-EPOCH  START-OFFSET  "
            "LAST-TIMESTAMP  DURATION-MIN"
        ]
        assert json_lines(*arguments, *tiny) == []
        [described] = json_lines(
            "describe", "--bootstrap", bootstrap, "--transactional-id", "tx-owed"
        )
        assert described["partitions"] == [{"topic": "owed-orders", "partition": 0}]

        producer.commit_transaction(CLIENT_TIMEOUT_S)

    assert json_lines(*arguments, *tiny) == []
    assert json_lines(*arguments, "--partition", "0", *tiny) == []


def test_find_hanging_of_an_unknown_topic_or_partition_fails(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap
    result = kshim_transactions("find-hanging", "--bootstrap", bootstrap, "--topic", "nowhere")
    assert_one_error_line(
        result, 1, f"{PROGRAM}: error: cannot describe topic nowhere: UNKNOWN_TOPIC_OR_PARTITION"
    )
    with transactional_producer(broker, "tx-partitions") as producer:
        begin_and_write(producer, "two-partitions", partition=0)
        producer.commit_transaction(CLIENT_TIMEOUT_S)
    result = kshim_transactions(
        "find-hanging", "--bootstrap", bootstrap, "--topic", "two-partitions", "--partition", "5"
    )
    assert_one_error_line(
        result,
        1,
        f"{PROGRAM}: error: topic two-partitions has no partition 5: UNKNOWN_TOPIC_OR_PARTITION",
    )


def test_abort_fails_against_kshim_naming_the_missing_api_and_changes_nothing(
    broker: BrokerProcess,
) -> None:
    bootstrap = broker.bootstrap
    with transactional_producer(broker, "tx-not-aborted") as producer:
        begin_and_write(producer, "kept-orders", partition=0, count=3)
        producer_id = listed(broker)["tx-not-aborted"]["producer_id"]

        for target in (
            ("--start-offset", "0"),
            (
                "--producer-id",
                str(producer_id),
                "--producer-epoch",
                "0",
                "--coordinator-epoch",
                "-1",
            ),
        ):
            result = kshim_transactions(
                "abort", "--bootstrap", bootstrap, "--topic", "kept-orders", "--partition", "0",
                *target,
            )  # fmt: skip
            assert_one_error_line(
                result,
                1,
                f"{PROGRAM}: error: cannot abort a transaction on kept-orders-0: broker "
                f"{NODE_ID} at {bootstrap} does not serve WriteTxnMarkers (API key 27); kshim "
                "ends an overdue transaction by its review (kshim.review.hook), not by a "
                "client's marker",
            )

        assert listed(broker)["tx-not-aborted"]["state"] == "Ongoing"
        producer.commit_transaction(CLIENT_TIMEOUT_S)  # still the producer's to end
    assert listed(broker)["tx-not-aborted"]["state"] == "CompleteCommit"


@pytest.mark.parametrize(
    ("arguments", "line"),
    [
        (
            ("abort", "--topic", "t", "--partition", "0"),
            "abort needs --start-offset, or --producer-id with --producer-epoch and "
            "--coordinator-epoch",
        ),
        (
            ("abort", "--topic", "t", "--partition", "0", "--start-offset", "1",
             "--producer-id", "4"),
            "abort takes --start-offset or --producer-id, not both",
        ),
        (
            ("abort", "--topic", "t", "--partition", "0", "--producer-id", "4",
             "--producer-epoch", "0"),
            "--producer-id needs --producer-epoch and --coordinator-epoch",
        ),
        (
            ("list", "--state", "Running"),
            "argument --state: 'Running' is not one of Empty, Ongoing, PrepareCommit, "
            "PrepareAbort, CompleteCommit, CompleteAbort, Dead, PrepareEpochFence; see "
            "'kshim transactions list --help'",
        ),
        (
            ("find-hanging", "--topic", "t", "--max-transaction-timeout", "-1"),
            "argument --max-transaction-timeout: '-1' is not a number of minutes (0 or more); "
            "see 'kshim transactions find-hanging --help'",
        ),
        (
            ("find-hanging",),
            "the following arguments are required: --topic; see "
            "'kshim transactions find-hanging --help'",
        ),
    ],
)  # fmt: skip
def test_usage_mistakes_are_one_error_line(
    broker: BrokerProcess, arguments: tuple[str, ...], line: str
) -> None:
    result = kshim_transactions(*arguments, "--bootstrap", broker.bootstrap)
    assert_one_error_line(result, 2, f"{PROGRAM}: error: {line}")


def test_a_command_config_that_cannot_be_used_is_refused(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    config = tmp_path / "admin.properties"
    config.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\nsasl.username=ops\n",
        encoding="utf-8",
    )
    result = kshim_transactions(
        "list", "--bootstrap", broker.bootstrap, "--command-config", str(config)
    )
    assert_one_error_line(
        result,
        2,
        f"{PROGRAM}: error: --command-config {config}: sasl.mechanism=SCRAM-SHA-256 needs "
        'sasl.jaas.config (LoginModule required username="..." password="...";), or '
        "sasl.username and sasl.password",
    )
    config.write_text("security.protocol=PLAINTEXT\nclient.id=ops\n", encoding="utf-8")
    succeeded("list", "--bootstrap", broker.bootstrap, "--command-config", str(config))


def test_an_unreachable_broker_is_one_error_line() -> None:
    bootstrap = f"127.0.0.1:{free_port()}"
    result = kshim_transactions("list", "--bootstrap", bootstrap)
    assert_one_error_line(
        result, 1, f"{PROGRAM}: error: cannot reach {bootstrap}: connection refused"
    )


# Against a scripted Kafka peer: hanging transactions, and a broker that serves
# WriteTxnMarkers (API key 27).

PEER_NODE = 1
TOPIC = "payments"
MINUTE_MS = 60_000
OLD_MS = 20 * MINUTE_MS + 30_000  # 20 minutes and a half: past the default 15
YOUNG_MS = 1 * MINUTE_MS
NO_OPEN_TRANSACTION = -1
TRANSACTIONAL_ID_NOT_FOUND = 105


def producer_state(
    producer_id: int,
    start_offset: int,
    last_timestamp: int,
    epoch: int = 3,
    coordinator_epoch: int = -1,
) -> dict[str, int]:
    return {
        "producer_id": producer_id,
        "producer_epoch": epoch,
        "last_sequence": 9,
        "last_timestamp": last_timestamp,
        "coordinator_epoch": coordinator_epoch,
        "current_txn_start_offset": start_offset,
    }


class Cluster:
    """What the scripted peer answers: one broker, leader of payments-0 and payments-1,
    with these producers, transactional ids and transactions."""

    def __init__(self, now_ms: int, serves_markers: bool) -> None:
        old, young = now_ms - OLD_MS, now_ms - YOUNG_MS
        self.old_timestamp = old
        self.serves_markers = serves_markers
        self.producers = {
            0: [
                producer_state(100, 5, old),  # no transactional id listed: hanging
                producer_state(101, 7, old),  # its coordinator lists payments-1 only: hanging
                producer_state(102, 9, old),  # its coordinator lists payments-0: owed a marker
                producer_state(103, 11, young),  # not old enough
                producer_state(104, NO_OPEN_TRANSACTION, old),  # no transaction open
            ],
            1: [producer_state(105, 2, old)],  # listed, but the coordinator forgot it: hanging
        }
        self.transactional_ids = {101: "moved-on", 102: "still-owed", 105: "forgotten"}
        self.partitions = {"moved-on": [(TOPIC, 1)], "still-owed": [(TOPIC, 0)]}
        self.peer = ScriptedBroker(
            {
                3: self.metadata,
                10: self.find_coordinator,
                18: self.api_versions,
                27: self.write_txn_markers,
                61: self.describe_producers,
                65: self.describe_transactions,
                66: self.list_transactions,
            }
        )

    def metadata(self, request: Any) -> Mapping[str, Any]:
        broker = {"node_id": PEER_NODE, "host": "127.0.0.1", "port": self.peer.port}
        topics = [
            {
                "name": topic.name,
                "error_code": 0 if topic.name == TOPIC else 3,
                "partitions": [
                    {"partition_index": index, "leader_id": PEER_NODE}
                    for index in (self.producers if topic.name == TOPIC else ())
                ],
            }
            for topic in request.topics or ()
        ]
        return {"brokers": [broker], "controller_id": PEER_NODE, "topics": topics}

    def find_coordinator(self, request: Any) -> Mapping[str, Any]:
        coordinators = [
            {"key": key, "node_id": PEER_NODE, "host": "127.0.0.1", "port": self.peer.port}
            for key in request.coordinator_keys
        ]
        return {"coordinators": coordinators}

    def api_versions(self, _: Any) -> Mapping[str, Any]:
        served = [(3, 0, 12), (10, 0, 6), (18, 0, 4), (61, 0, 0), (65, 0, 0), (66, 0, 1)]
        if self.serves_markers:
            served.append((27, 0, 1))
        keys = [
            {"api_key": key, "min_version": low, "max_version": high} for key, low, high in served
        ]
        return {"api_keys": keys}

    def describe_producers(self, request: Any) -> Mapping[str, Any]:
        topics = [
            {
                "name": topic.name,
                "partitions": [
                    {"partition_index": index, "active_producers": self.producers[index]}
                    for index in topic.partition_indexes
                ],
            }
            for topic in request.topics
        ]
        return {"topics": topics}

    def list_transactions(self, request: Any) -> Mapping[str, Any]:
        wanted = set(request.producer_id_filters)
        states = [
            {"transactional_id": name, "producer_id": producer_id, "transaction_state": "Ongoing"}
            for producer_id, name in self.transactional_ids.items()
            if not wanted or producer_id in wanted
        ]
        return {"transaction_states": states}

    def describe_transactions(self, request: Any) -> Mapping[str, Any]:
        producer_ids = {name: producer_id for producer_id, name in self.transactional_ids.items()}
        states = []
        for name in request.transactional_ids:
            if name not in self.partitions:
                states.append({"transactional_id": name, "error_code": TRANSACTIONAL_ID_NOT_FOUND})
                continue
            topics: dict[str, list[int]] = {}
            for topic, index in self.partitions[name]:
                topics.setdefault(topic, []).append(index)
            states.append(
                {
                    "transactional_id": name,
                    "transaction_state": "Ongoing",
                    "transaction_timeout": 60_000,
                    "transaction_start_time": self.old_timestamp,
                    "producer_id": producer_ids[name],
                    "producer_epoch": 3,
                    "topics": [
                        {"topic": topic, "partitions": parts} for topic, parts in topics.items()
                    ],
                }
            )
        return {"transaction_states": states}

    def write_txn_markers(self, request: Any) -> Mapping[str, Any]:
        markers = [
            {
                "producer_id": marker.producer_id,
                "topics": [
                    {
                        "name": topic.name,
                        "partitions": [
                            {"partition_index": index} for index in topic.partition_indexes
                        ],
                    }
                    for topic in marker.topics
                ],
            }
            for marker in request.markers
        ]
        return {"markers": markers}


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    serves_markers = getattr(request, "param", True)
    scripted = Cluster(int(time.time() * 1000), serves_markers)
    scripted.peer.start()
    yield scripted
    scripted.peer.stop()


def test_find_hanging_reports_open_transactions_no_coordinator_will_end(cluster: Cluster) -> None:
    arguments = ("find-hanging", "--bootstrap", cluster.peer.bootstrap, "--topic", TOPIC)
    old = cluster.old_timestamp

    found = json_lines(*arguments)

    assert [(row["partition"], row["producer_id"]) for row in found] == [
        (0, 100),
        (0, 101),
        (1, 105),
    ]
    assert found[0] == {
        "topic": TOPIC,
        "partition": 0,
        "producer_id": 100,
        "producer_epoch": 3,
        "coordinator_epoch": -1,
        "start_offset": 5,
        "last_timestamp": old,
        "duration_ms": found[0]["duration_ms"],
    }
    assert OLD_MS <= found[0]["duration_ms"] < OLD_MS + COMMAND_TIMEOUT_S * 1000
    # Only the open transactions old enough were looked up (not 103: young; not 104: none).
    [*_, listing] = cluster.peer.requests_of(66)
    assert sorted(listing.producer_id_filters) == [100, 101, 102, 105]

    table = succeeded(*arguments)
    assert table[0].split() == [
        "TOPIC", "PARTITION", "PRODUCER-ID", "PRODUCER-EPOCH", "COORDINATOR-EPOCH",
        "START-OFFSET", "LAST-TIMESTAMP", "DURATION-MIN",
    ]  # fmt: skip
    assert rows(table) == [
        [TOPIC, "0", "100", "3", "-1", "5", str(old), "20"],
        [TOPIC, "0", "101", "3", "-1", "7", str(old), "20"],
        [TOPIC, "1", "105", "3", "-1", "2", str(old), "20"],
    ]


def test_find_hanging_takes_the_partition_and_the_max_timeout(cluster: Cluster) -> None:
    arguments = ("find-hanging", "--bootstrap", cluster.peer.bootstrap, "--topic", TOPIC)
    only_one = json_lines(*arguments, "--partition", "1")
    assert [(row["partition"], row["producer_id"]) for row in only_one] == [(1, 105)]
    assert cluster.peer.requests_of(61)[-1].topics[0].partition_indexes == (1,)
    # Every transaction here is 20.5 minutes old: under a 30-minute limit none is a candidate.
    assert json_lines(*arguments, "--max-transaction-timeout", "30") == []
    # A young one becomes a candidate under a smaller limit: producer 103, open for a minute.
    small = json_lines(*arguments, "--max-transaction-timeout", "0.5")
    assert [row["producer_id"] for row in small] == [100, 101, 103, 105]


def test_abort_by_start_offset_writes_an_abort_marker_for_that_producer(cluster: Cluster) -> None:
    bootstrap = cluster.peer.bootstrap

    aborted = succeeded(
        "abort",
        "--bootstrap",
        bootstrap,
        "--topic",
        TOPIC,
        "--partition",
        "0",
        "--start-offset",
        "7",
    )

    assert aborted == [f"aborted the transaction of producer 101 (epoch 3) on {TOPIC}-0"]
    keys = [key for key, _, _ in cluster.peer.requests]
    assert keys.index(18) < keys.index(61) < keys.index(27)  # ApiVersions asked first
    [(_, version, request)] = [entry for entry in cluster.peer.requests if entry[0] == 27]
    assert version == 1
    [marker] = request.markers
    assert (marker.producer_id, marker.producer_epoch, marker.transaction_result) == (101, 3, False)
    assert marker.coordinator_epoch == 0  # -1 (none known) is sent as 0, as Kafka's tool does
    assert [(topic.name, topic.partition_indexes) for topic in marker.topics] == [(TOPIC, (0,))]


def test_abort_by_producer_id_sends_the_given_epochs(cluster: Cluster) -> None:
    [aborted] = json_lines(
        "abort", "--bootstrap", cluster.peer.bootstrap, "--topic", TOPIC, "--partition", "1",
        "--producer-id", "105", "--producer-epoch", "4", "--coordinator-epoch", "6",
    )  # fmt: skip
    assert aborted == {
        "topic": TOPIC,
        "partition": 1,
        "producer_id": 105,
        "producer_epoch": 4,
        "coordinator_epoch": 6,
        "aborted": True,
    }
    [request] = cluster.peer.requests_of(27)
    [marker] = request.markers
    assert (marker.producer_id, marker.producer_epoch, marker.coordinator_epoch) == (105, 4, 6)
    assert cluster.peer.requests_of(61) == []  # the transaction was named, not looked up


def test_abort_of_an_offset_where_no_transaction_starts_fails(cluster: Cluster) -> None:
    result = kshim_transactions(
        "abort", "--bootstrap", cluster.peer.bootstrap, "--topic", TOPIC, "--partition", "0",
        "--start-offset", "6",
    )  # fmt: skip
    assert_one_error_line(
        result, 1, f"{PROGRAM}: error: no open transaction starts at offset 6 on {TOPIC}-0"
    )
    assert cluster.peer.requests_of(27) == []


@pytest.mark.parametrize("cluster", [False], indirect=True)
def test_abort_asks_api_versions_and_sends_no_marker_to_a_broker_without_them(
    cluster: Cluster,
) -> None:
    result = kshim_transactions(
        "abort", "--bootstrap", cluster.peer.bootstrap, "--topic", TOPIC, "--partition", "0",
        "--start-offset", "5",
    )  # fmt: skip
    [line] = result.stderr.splitlines()
    assert result.returncode == 1
    assert f"broker {PEER_NODE} at {cluster.peer.bootstrap} does not serve WriteTxnMarkers" in line
    assert cluster.peer.requests_of(18) != []
    assert cluster.peer.requests_of(27) == cluster.peer.requests_of(61) == []

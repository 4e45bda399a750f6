"""``kshim groups reset-offsets`` and ``kshim groups delete`` as a user runs them: the real
command (``python -m kshim groups ...``) in a child process against a real ``kshim serve``.

A reset is proven by a consumer: after ``--execute``, a confluent-kafka consumer of the group
(``auto.offset.reset=error``, so it can only start from a committed offset) reads its first
record exactly at the offset the command set. Each topic has ten records, timestamped one
second apart from a fixed time, so that every target has one right answer; the committed
offset a test starts from is never that answer, so a reset that does nothing fails.

Every wait is bounded; only processes started here are signalled.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_INVALID, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kshim.testing import BrokerProcess, failure_lines

pytestmark = pytest.mark.timeout(180)

COMMAND_TIMEOUT_S = 60.0
WAIT_S = 30.0
RECORDS = 10
BASE_TIME_MS = 1_700_000_000_000  # record i has timestamp BASE_TIME_MS + i seconds
DRY_RUN_LINE = "dry run: nothing changed; add --execute to commit these offsets"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for this module; each test uses topics and groups of its own names."""
    process = BrokerProcess(tmp_path_factory.mktemp("groups-admin") / "data").start()
    yield process
    process.stop()
    assert failure_lines(process.log_text()) == []


def kshim_groups(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kshim", "groups", *arguments],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )


def succeeded(*arguments: str) -> list[str]:
    """The lines the command printed; fails the test unless it exited 0 and said nothing
    on stderr."""
    result = kshim_groups(*arguments)
    assert (result.returncode, result.stderr) == (0, ""), result
    return result.stdout.splitlines()


def failed(status: int, *arguments: str) -> tuple[list[str], str]:
    """(stdout lines, the one stderr line) of a command that must fail with ``status``."""
    result = kshim_groups(*arguments)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == status, result
    [line] = result.stderr.splitlines()
    return result.stdout.splitlines(), line


def unique(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex[:8]}"


def new_topic(bootstrap: str, partitions: int = 1) -> str:
    """A topic of ``partitions`` with RECORDS records in each, offset i timestamped
    BASE_TIME_MS + i seconds."""
    topic = unique("orders")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=WAIT_S)
    producer = Producer({"bootstrap.servers": bootstrap})
    for index in range(RECORDS):
        for partition in range(partitions):
            timestamp = BASE_TIME_MS + index * 1000
            producer.produce(topic, value=f"r{index}", partition=partition, timestamp=timestamp)
    assert producer.flush(WAIT_S) == 0
    return topic


def produce_one(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, value=b"one more", partition=0)
    assert producer.flush(WAIT_S) == 0


def delete_records_before(bootstrap: str, topic: str, offset: int) -> None:
    """Moves partition 0's log start to ``offset`` (DeleteRecords)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    [future] = admin.delete_records([TopicPartition(topic, 0, offset)]).values()
    assert future.result(timeout=WAIT_S).low_watermark == offset


def commit(bootstrap: str, group: str, topic: str, offset: int, partition: int = 0) -> None:
    """A standalone commit (generation -1, no member), as a consumer outside the group
    sends it."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(topic, partition, offset)], asynchronous=False)
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, topic: str, partition: int = 0) -> int | None:
    """The group's committed offset of the partition (None: none), read without joining."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        [answer] = consumer.committed([TopicPartition(topic, partition)], timeout=WAIT_S)
    finally:
        consumer.close()
    return None if answer.offset == OFFSET_INVALID else int(answer.offset)


def group_consumer(bootstrap: str, group: str, topic: str) -> Consumer:
    """A member of ``group`` subscribed to ``topic`` that starts only from a committed offset
    (auto.offset.reset=error) and never commits itself."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "error",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
        }
    )
    consumer.subscribe([topic])
    return consumer


def first_record_offset(consumer: Consumer) -> int:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is None:
            continue
        error = message.error()
        assert error is None or error.code() == KafkaError._PARTITION_EOF, error
        if error is None:
            return int(message.offset())
    raise AssertionError(f"no record within {WAIT_S} s")


def wait_for_assignment(consumer: Consumer) -> None:
    deadline = time.monotonic() + WAIT_S
    while not consumer.assignment():
        assert time.monotonic() < deadline, "the consumer got no partitions"
        consumer.poll(0.1)


def resumes_at(bootstrap: str, group: str, topic: str) -> int:
    """The offset of the first record a new member of ``group`` reads."""
    consumer = group_consumer(bootstrap, group, topic)
    try:
        return first_record_offset(consumer)
    finally:
        consumer.close()


def iso_utc(timestamp_ms: int) -> str:
    moment = datetime.datetime.fromtimestamp(timestamp_ms / 1000, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


@pytest.mark.parametrize(
    ("target", "log_start", "committed_before", "expected"),
    [
        (["--to-earliest"], 3, 7, 3),
        (["--to-latest"], 0, 4, RECORDS),
        (["--to-datetime", iso_utc(BASE_TIME_MS + 4_500)], 0, 8, 5),
        (["--shift-by", "-4"], 0, 6, 2),
    ],
    ids=["to-earliest", "to-latest", "to-datetime", "shift-by"],
)
def test_reset_shows_the_plan_then_executes_it_and_a_consumer_resumes_there(
    broker: BrokerProcess, target: list[str], log_start: int, committed_before: int, expected: int
) -> None:
    bootstrap = broker.bootstrap
    topic, group = new_topic(bootstrap), unique("billing")
    if log_start:
        delete_records_before(bootstrap, topic, log_start)
    commit(bootstrap, group, topic, committed_before)
    arguments = ("reset-offsets", "--bootstrap", bootstrap, "--group", group, "--topic", topic)
    table = [
        f"{'GROUP':{len(group)}}  {'TOPIC':{len(topic)}}  PARTITION  COMMITTED  NEW-OFFSET",
        f"{group}  {topic}          0  {committed_before:>9}  {expected:>10}",
    ]

    assert succeeded(*arguments, *target) == [*table, DRY_RUN_LINE]
    assert committed(bootstrap, group, topic) == committed_before

    executed = succeeded(*arguments, *target, "--execute")

    assert executed == [*table, f"committed the new offsets of group {group}"]
    assert committed(bootstrap, group, topic) == expected
    produce_one(bootstrap, topic)  # so that a group reset to the end has a record to read
    assert resumes_at(bootstrap, group, topic) == expected


def test_shift_by_is_kept_between_the_log_start_and_the_end(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap
    topic, group = new_topic(bootstrap, partitions=2), unique("shifted")
    delete_records_before(bootstrap, topic, 3)
    commit(bootstrap, group, topic, 5, partition=0)
    commit(bootstrap, group, topic, 8, partition=1)
    arguments = ("reset-offsets", "--bootstrap", bootstrap, "--group", group, "--topic", topic)

    back = [json.loads(line) for line in succeeded(*arguments, "--shift-by", "-10", "--json")]
    ahead = [json.loads(line) for line in succeeded(*arguments, "--shift-by", "100", "--json")]

    assert back == [
        {"group": group, "topic": topic, "partition": 0, "committed": 5, "new_offset": 3,
         "executed": False},
        {"group": group, "topic": topic, "partition": 1, "committed": 8, "new_offset": 0,
         "executed": False},
    ]  # fmt: skip
    assert [(row["partition"], row["new_offset"]) for row in ahead] == [(0, RECORDS), (1, RECORDS)]
    only = succeeded(*arguments, "--shift-by", "1", "--partition", "1", "--execute", "--json")
    assert [json.loads(line)["new_offset"] for line in only] == [9]
    assert (committed(bootstrap, group, topic, 0), committed(bootstrap, group, topic, 1)) == (5, 9)
    status = succeeded("--bootstrap", bootstrap, "--group", group)  # no subcommand: the table
    assert status[2].split()[:4] == [group, topic, "1", "9"]


def test_a_partition_never_committed_starts_from_the_target_but_cannot_be_shifted(
    broker: BrokerProcess,
) -> None:
    bootstrap = broker.bootstrap
    topic, group = new_topic(bootstrap), unique("fresh")
    arguments = ("reset-offsets", "--bootstrap", bootstrap, "--group", group, "--topic", topic)

    _, line = failed(1, *arguments, "--shift-by", "1", "--execute")

    assert line == (
        f"kshim groups: error: cannot shift the offset of {topic}-0: the group committed none"
    )
    assert committed(bootstrap, group, topic) is None
    [row] = [json.loads(line) for line in succeeded(*arguments, "--to-earliest", "--json")]
    assert (row["committed"], row["new_offset"]) == (None, 0)
    succeeded(*arguments, "--to-datetime", iso_utc(BASE_TIME_MS + 2_000), "--execute")
    assert resumes_at(bootstrap, group, topic) == 2


def test_reset_is_refused_while_the_group_has_a_member(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap
    topic, group = new_topic(bootstrap), unique("busy")
    commit(bootstrap, group, topic, 6)
    arguments = ("reset-offsets", "--bootstrap", bootstrap, "--group", group, "--topic", topic)
    refusal = (
        f"kshim groups: error: cannot reset offsets of group {group} while it is active "
        "(state Stable, 1 member); stop its consumers first"
    )
    member = group_consumer(bootstrap, group, topic)
    try:
        wait_for_assignment(member)
        for dry_run_or_not in ([], ["--execute"]):
            stdout, line = failed(1, *arguments, "--to-earliest", *dry_run_or_not)
            assert (stdout, line) == ([], refusal)
        assert committed(bootstrap, group, topic) == 6
    finally:
        member.close()  # leaves the group: Empty again

    succeeded(*arguments, "--to-earliest", "--execute")
    assert resumes_at(bootstrap, group, topic) == 0


def test_delete_removes_empty_groups_and_refuses_one_with_members(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap
    topic = new_topic(bootstrap)
    idle, busy, never = unique("idle"), unique("busy"), unique("never")
    commit(bootstrap, idle, topic, 4)
    commit(bootstrap, busy, topic, 2)
    member = group_consumer(bootstrap, busy, topic)
    try:
        wait_for_assignment(member)
        # --bootstrap before the subcommand counts too.
        stdout, line = failed(
            1, "--bootstrap", bootstrap, "delete", "--group", idle, "--group", busy,
            "--group", never,
        )  # fmt: skip
        assert stdout == [f"deleted group {idle}"]
        assert line == (
            f"kshim groups: error: cannot delete group {busy}: NON_EMPTY_GROUP; "
            f"{never}: GROUP_ID_NOT_FOUND"
        )
        assert committed(bootstrap, busy, topic) == 2
    finally:
        member.close()

    assert committed(bootstrap, idle, topic) is None
    _, gone = failed(1, "--bootstrap", bootstrap, "--group", idle)
    assert gone == f"kshim groups: error: consumer group {idle} does not exist"
    deleted = succeeded("delete", "--bootstrap", bootstrap, "--group", busy, "--json")
    assert [json.loads(line) for line in deleted] == [{"group": busy, "deleted": True}]
    assert committed(bootstrap, busy, topic) is None


def test_an_unknown_partition_or_topic_is_one_error_line(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap
    topic, group = new_topic(bootstrap), unique("lost")
    arguments = ("reset-offsets", "--bootstrap", bootstrap, "--group", group, "--to-latest")

    _, partition = failed(1, *arguments, "--topic", topic, "--partition", "4")
    _, unknown = failed(1, *arguments, "--topic", "no-such-topic")

    assert partition == f"kshim groups: error: no such partition: {topic}-4"
    assert unknown == (
        "kshim groups: error: cannot describe topic no-such-topic: UNKNOWN_TOPIC_OR_PARTITION"
    )


def test_reset_needs_exactly_one_target(broker: BrokerProcess) -> None:
    arguments = ("reset-offsets", "--bootstrap", broker.bootstrap, "--group", "g", "--topic", "t")
    _, none = failed(2, *arguments)
    _, both = failed(2, *arguments, "--to-earliest", "--shift-by", "1")
    _, bad_time = failed(2, *arguments, "--to-datetime", "yesterday")
    assert none.startswith("kshim groups: error: one of the arguments --to-earliest --to-latest")
    assert "not allowed with argument" in both
    assert "'yesterday' is not an ISO 8601 date and time" in bad_time


def test_a_command_config_that_cannot_be_used_is_refused(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    bootstrap = broker.bootstrap
    topic, group = new_topic(bootstrap), unique("configured")
    commit(bootstrap, group, topic, 1)
    config = tmp_path / "admin.properties"
    config.write_text("security.protocol=SSL\nssl.keystore.type=PKCS12\n", encoding="utf-8")
    refused = (
        f"kshim groups: error: --command-config {config}: ssl.keystore.type=PKCS12 is not "
        "supported: kshim's client reads PEM stores only (export a JKS or PKCS12 store's "
        "certificates and key to PEM with keytool -exportcert -rfc, or openssl pkcs12 -nodes)"
    )
    for subcommand in (
        ["delete", "--group", group],
        ["reset-offsets", "--group", group, "--topic", topic, "--to-latest", "--execute"],
        [],  # the status table
    ):
        stdout, line = failed(
            2, *subcommand, "--bootstrap", bootstrap, "--command-config", str(config)
        )
        assert (stdout, line) == ([], refused)
    assert committed(bootstrap, group, topic) == 1


def test_a_command_config_given_before_the_subcommand_is_used(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    config = tmp_path / "admin.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\n", encoding="utf-8")
    _, line = failed(
        2,
        "--command-config",
        str(config),
        "delete",
        "--group",
        "g",
        "--bootstrap",
        broker.bootstrap,
    )
    assert line.startswith(f"kshim groups: error: --command-config {config}: "), line


def test_describe_members_shows_each_member_and_its_assignment(broker: BrokerProcess) -> None:
    """As kafka-consumer-groups.sh --describe --members --verbose: ids, host, client id,
    the partitions assigned; a group without members is said in one line."""
    bootstrap = broker.bootstrap
    topic = new_topic(bootstrap, partitions=2)
    busy, idle = unique("busy"), unique("idle")
    commit(bootstrap, idle, topic, 1)
    member = group_consumer(bootstrap, busy, topic)
    try:
        wait_for_assignment(member)
        lines = succeeded("describe", "--bootstrap", bootstrap, "--members", "--group", busy)
        objects = succeeded(
            "describe", "--bootstrap", bootstrap, "--members", "--group", busy, "--json"
        )
        quiet = succeeded("describe", "--bootstrap", bootstrap, "--members", "--group", idle)
        states = succeeded(
            "--bootstrap", bootstrap, "describe", "--state", "--group", busy, "--group", idle
        )
    finally:
        member.close()

    header, row = lines
    assert header.split() == [
        "GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
        "ASSIGNMENT",
    ]  # fmt: skip
    [described] = [json.loads(line) for line in objects]
    assert row.split() == [
        busy, described["member_id"], "-", described["client_host"], "rdkafka", "2",
        f"{topic}(0,1)",
    ]  # fmt: skip
    assert described["group"] == busy and described["group_instance_id"] is None
    assert described["assignment"] == [
        {"topic": topic, "partition": 0},
        {"topic": topic, "partition": 1},
    ]
    assert quiet == [f"consumer group {idle} has no active members"]
    assert [line.split() for line in states] == [
        ["GROUP", "STATE", "MEMBERS"],
        [busy, "Stable", "1"],
        [idle, "Empty", "0"],
    ]


def test_describe_names_a_group_that_does_not_exist(broker: BrokerProcess) -> None:
    never = unique("never")
    _, line = failed(1, "describe", "--bootstrap", broker.bootstrap, "--members", "--group", never)
    assert line == f"kshim groups: error: consumer group {never} does not exist"
    _, usage = failed(2, "describe", "--bootstrap", broker.bootstrap)
    assert "one of the arguments --members --state is required" in usage


def test_the_status_table_as_json(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap
    topic = new_topic(bootstrap)
    group = unique("json")
    commit(bootstrap, group, topic, 3)
    lines = succeeded("--bootstrap", bootstrap, "--group", group, "--json")
    assert [json.loads(line) for line in lines] == [
        {
            "group": group,
            "topic": topic,
            "partition": 0,
            "committed": 3,
            "log_end": RECORDS,
            "lag": RECORDS - 3,
            "members": 0,
        }
    ]
    # --json given to the group command is kept by its subcommands.
    deleted = succeeded("--bootstrap", bootstrap, "--json", "delete", "--group", group)
    assert [json.loads(line) for line in deleted] == [{"group": group, "deleted": True}]

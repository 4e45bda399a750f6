"""Names kshim reserves (``T.full``, ``T.delay``) are refused as a Kafka policy refuses a topic.

kshim's full-data view ``T.full`` (read-only) and delay companion ``T.delay`` (write-only)
have no counterpart in Kafka. What Kafka does have is the answer to a request its
policy refuses: a broker started with a ``create.topic.policy.class.name`` answers
CreateTopics with POLICY_VIOLATION and the policy's own message, nothing created
(partitions and replication factor -1, no configs). So kshim refuses the same way: a
reserved name in CreateTopics, and every admin call that would change a view or a
companion (CreatePartitions, DeleteTopics, AlterConfigs, IncrementalAlterConfigs),
each with a message saying what to do instead.

The Kafka side runs Apache Kafka 3.9.2 with a policy refusing the same names
(java/ReservedNamesPolicy.java, compiled here and put on its class path as a Java
agent). CreateTopics gets the same answer from both; for the calls on an existing view
Kafka has no such topic and answers UNKNOWN_TOPIC_OR_PARTITION, which is the intended
difference K11 (deviations.py).
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compat_tests.brokers import BrokerUnderTest, acts_as_kafka, fronted
from compat_tests.kafka_sources import REFERENCE_JARS, jars_command, launched
from compat_tests.raw_transactions import probe, wait_for_leader
from compat_tests.support import create_topic
from kshim.jvm import artifacts

pytestmark = [pytest.mark.wire, pytest.mark.timeout(180)]

CREATE_TOPICS, DELETE_TOPICS, ALTER_CONFIGS, CREATE_PARTITIONS, INCREMENTAL_ALTER = (
    19,
    20,
    33,
    37,
    44,
)
METADATA = 3
NONE, UNKNOWN_TOPIC_OR_PARTITION, POLICY_VIOLATION = 0, 3, 44
TOPIC_RESOURCE = 2
POLICY_CLASS = "ReservedNamesPolicy"
POLICY_SOURCE = Path(__file__).resolve().parent / "java" / f"{POLICY_CLASS}.java"
SUFFIXES = (".full", ".delay")


def policy_unavailable_reason() -> str | None:
    """Why the policy cannot be built and run here, or None."""
    missing = [tool for tool in ("javac", "jar") if shutil.which(tool) is None]
    if missing:
        return f"no {' or '.join(missing)} to build the Kafka policy"
    return artifacts.unavailable_reason(REFERENCE_JARS)


def policy_agent(directory: Path) -> Path:
    """The policy compiled against Kafka's jars, in a jar whose manifest makes it a Java
    agent (an agent's jar joins the application class path, which Kafka's fixed -cp
    leaves no other way into)."""
    classes = directory / "classes"
    classpath = artifacts.classpath(REFERENCE_JARS)
    command = ["javac", "-d", str(classes), "-cp", classpath, str(POLICY_SOURCE)]
    subprocess.run(command, check=True, capture_output=True)
    manifest = directory / "manifest.txt"
    manifest.write_text(f"Premain-Class: {POLICY_CLASS}\n", encoding="utf-8")
    agent = directory / "policy.jar"
    subprocess.run(["jar", "cfm", str(agent), str(manifest), "-C", str(classes), "."],
                   check=True, capture_output=True)  # fmt: skip
    return agent


@pytest.fixture(scope="module")
def policed(broker: BrokerUnderTest) -> Iterator[BrokerUnderTest]:
    """kshim as it is; for Kafka, a Kafka of its own whose policy refuses the names."""
    if broker.name == "kshim":
        yield broker
        return
    if not acts_as_kafka(broker.name):
        pytest.skip(f"{broker.name}: no topic creation policy to compare with")
    reason = policy_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    with tempfile.TemporaryDirectory(prefix="compat-policy-") as directory:
        agent = policy_agent(Path(directory))
        settings = {"create.topic.policy.class.name": POLICY_CLASS}
        agent_option = shlex.quote(f"-javaagent:{agent}")
        template = f"JAVA_TOOL_OPTIONS={agent_option} {jars_command(REFERENCE_JARS, settings)}"
        with launched(template) as kafka, fronted(broker.name, kafka.bootstrap) as front:
            yield front


def create_topics(broker: BrokerUnderTest, name: str, validate_only: bool) -> Any:
    request = {
        "topics": [
            {
                "name": name,
                "num_partitions": 1,
                "replication_factor": 1,
                "assignments": [],
                "configs": [],
            }
        ],
        "timeout": 10_000,
        "validate_only": validate_only,
    }
    [answer] = probe(broker).call(CREATE_TOPICS, 7, request).topics
    return answer


@pytest.mark.parametrize("suffix", SUFFIXES)
@pytest.mark.parametrize("validate_only", [False, True], ids=["create", "validate"])
def test_a_reserved_name_is_refused_as_a_policy_refuses_a_topic(
    policed: BrokerUnderTest, suffix: str, validate_only: bool
) -> None:
    name = probe(policed).name("reserved") + suffix
    answer = create_topics(policed, name, validate_only)

    shape = (int(answer.error_code), answer.num_partitions, answer.replication_factor)
    assert shape == (POLICY_VIOLATION, -1, -1)
    assert (answer.topic_id, tuple(answer.configs)) == (None, ())  # the zero id, no configs
    assert answer.error_message and f"'{suffix}'" in answer.error_message
    listed = probe(policed).call(METADATA, 12, {"topics": [{"name": name}],
                                                "allow_auto_topic_creation": False})  # fmt: skip
    assert [int(topic.error_code) for topic in listed.topics] == [UNKNOWN_TOPIC_OR_PARTITION]


def test_changes_to_a_view_or_a_companion_are_policy_violations(
    policed: BrokerUnderTest,
) -> None:
    """On kshim each is refused with a message naming what to do; Kafka has no such
    topics (K11)."""
    topic = create_topic(policed, "reserved-admin")
    wait_for_leader(policed, topic)
    view, companion = topic + ".full", topic + ".delay"
    # Named once, the companion exists on kshim (it is created when first named).
    probe(policed).call(METADATA, 12, {"topics": [{"name": companion}],
                                       "allow_auto_topic_creation": False})  # fmt: skip

    answers = {
        (name, call): outcome(policed, call, name)
        for name in (view, companion)
        for call in ("CreatePartitions", "DeleteTopics", "AlterConfigs", "IncrementalAlterConfigs")
    }

    if acts_as_kafka(policed.name):
        assert {key: code for key, (code, _) in answers.items()} == dict.fromkeys(
            answers, UNKNOWN_TOPIC_OR_PARTITION
        )
        return
    instead = {
        "CreatePartitions": "add partitions to its topic instead",
        "DeleteTopics": "delete its topic instead",
        "AlterConfigs": "change its topic instead",
        "IncrementalAlterConfigs": "change its topic instead",
    }
    assert answers == {
        (name, call): (POLICY_VIOLATION, f"{name} is {what(name)}; {instead[call]}")
        for name, call in answers
    }


def what(name: str) -> str:
    if name.endswith(".full"):
        return "a read-only full-data view"
    return f"the write-only delay companion of {name.removesuffix('.delay')}"


def outcome(broker: BrokerUnderTest, call: str, name: str) -> tuple[int, str | None]:
    """(error code, message) of one admin call on ``name``."""
    raw = probe(broker)
    if call == "CreatePartitions":
        request = {"topics": [{"name": name, "count": 2, "assignments": None}],
                   "timeout": 10_000, "validate_only": False}  # fmt: skip
        [result] = raw.call(CREATE_PARTITIONS, 3, request).results
        return int(result.error_code), result.error_message
    if call == "DeleteTopics":
        [result] = raw.call(
            DELETE_TOPICS, 6, {"topics": [{"name": name}], "timeout": 10_000}
        ).responses
        return int(result.error_code), result.error_message
    change: dict[str, Any] = {"name": "retention.ms", "value": "1000"}
    if call == "IncrementalAlterConfigs":
        change["config_operation"] = 0  # SET
    resource = {"resource_type": TOPIC_RESOURCE, "resource_name": name, "configs": [change]}
    api = INCREMENTAL_ALTER if call == "IncrementalAlterConfigs" else ALTER_CONFIGS
    [result] = raw.call(api, 1, {"resources": [resource], "validate_only": False}).responses
    return int(result.error_code), result.error_message

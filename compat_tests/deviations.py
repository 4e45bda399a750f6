"""Known differences: Tansu's deviations from Kafka, and kshim's intended ones.

A scenario that a known Tansu deviation breaks is tagged with ``deviates(...)``; the
suite's conftest turns the tag into ``xfail(strict=False)`` for that broker only, with the
deviation named in the reason. So the ordinary test run stays green, and the results
matrix (``report.py``) still records the failure, attributed to the deviation. Sources:
docs/protocol-notes.md §7.2-§7.3, confirmed by this suite.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest


@dataclass(frozen=True, slots=True)
class Deviation:
    broker: str
    code: str
    title: str
    detail: str

    @property
    def reason(self) -> str:
        return f"known {self.broker} deviation {self.code}: {self.title}"


TANSU_LATEST_OFFSET = Deviation(
    "tansu",
    "T1",
    "ListOffsets LATEST is the last batch's base offset + 1, not the high watermark",
    "After a multi-record batch, every client's end offset (and Spark's batch range) stops "
    "short of the data Fetch returns: Spark reads only the first record of the last batch "
    "(docs/protocol-notes.md §7.3 #1).",
)
TANSU_ABORTED_TRANSACTIONS = Deviation(
    "tansu",
    "T2",
    "Fetch always returns an empty AbortedTransactions list",
    "read_committed consumers cannot tell aborted batches from committed ones and deliver "
    "aborted records (docs/protocol-notes.md §7.3 #2).",
)
TANSU_INIT_PRODUCER_ID_V0 = Deviation(
    "tansu",
    "T3",
    "InitProducerId v0-v2 fails with UNKNOWN_SERVER_ERROR",
    "aiokafka speaks InitProducerId v0 only, so its idempotent and transactional producers "
    "cannot start (docs/protocol-notes.md §7.3 #3).",
)
TANSU_DELETE_RECORDS_V2 = Deviation(
    "tansu",
    "T4",
    "DeleteRecords v2 closes the connection",
    "Every admin client's delete_records fails (docs/protocol-notes.md §7.3 #4).",
)
TANSU_API_VERSIONS_FALLBACK = Deviation(
    "tansu",
    "T5",
    "an ApiVersions version above the maximum is answered as v3+ with error 0",
    "Kafka answers with a v0 body carrying UNSUPPORTED_VERSION (KIP-511), which is how a "
    "newer client learns the broker's range (docs/protocol-notes.md §7.3 #5).",
)
TANSU_GENERATION_ZERO = Deviation(
    "tansu",
    "T6",
    "the first JoinGroup generation is 0, not 1",
    "aiokafka sends LeaveGroup only when generation > 0, so its closed member stays in the "
    "group until the session times out (docs/protocol-notes.md §7.3 #6).",
)
TANSU_AUTHORIZED_OPERATIONS = Deviation(
    "tansu",
    "T7",
    "DescribeGroups returns authorized_operations = -1 even when not asked for",
    "Kafka sends INT32_MIN ('not computed') unless the client asks; kafka-python's "
    "describe_groups decodes -1 as a bit set and raises 'ValueError: 15 is not a valid "
    "ACLOperation' (docs/protocol-notes.md §7.3 #7).",
)
TANSU_NO_ALTER_CONFIGS = Deviation(
    "tansu",
    "T8",
    "AlterConfigs (key 33) is not implemented",
    "aiokafka's admin has only the legacy AlterConfigs, so it cannot change topic configs "
    "(docs/protocol-notes.md §7.2).",
)
TANSU_NO_CREATE_PARTITIONS = Deviation(
    "tansu",
    "T9",
    "CreatePartitions (key 37) is not implemented",
    "No client can add partitions to a topic (docs/protocol-notes.md §7.2).",
)
TANSU_OLD_LIBRDKAFKA = Deviation(
    "tansu",
    "T10",
    "ApiVersions v3+ answers carry every tagged field, default-valued ones included",
    "Tansu writes SupportedFeatures, FinalizedFeaturesEpoch (-1), FinalizedFeatures and "
    "ZkMigrationReady (false) even when they hold their defaults. The librdkafka 2.0.2 inside "
    "Debian's kcat cannot parse that section ('Protocol read buffer underflow for ApiVersion "
    "v3' in rd_kafka_handle_ApiVersion), so kcat never gets past the handshake. kshim writes "
    "no tagged fields there; librdkafka 2.16 copes with both.",
)
TANSU_MAX_MESSAGE_BYTES = Deviation(
    "tansu",
    "T11",
    "a batch larger than the topic's max.message.bytes is stored",
    "Kafka refuses it with MESSAGE_TOO_LARGE (10); Tansu acknowledges and stores it, so a "
    "producer never learns that consumers with a bounded fetch size may not read it.",
)
TANSU_TIMESTAMP_LOOKUP = Deviation(
    "tansu",
    "T12",
    "ListOffsets by timestamp ignores record timestamps",
    "Every query was answered with offset 0 and the time the data was written, even a "
    "timestamp after the last record (Kafka: the first record whose timestamp is at or "
    "after T, or offset -1). Tansu looks up its storage objects' write times "
    "(docs/protocol-notes.md §7.2), so offsetsForTimes, kcat -o s@T and Spark's "
    "startingTimestamp start at the wrong record.",
)
TANSU_IMMEDIATE_FETCH = Deviation(
    "tansu",
    "T13",
    "a Fetch with MaxWaitMs 0 and MinBytes 0 answers with no topics at all",
    "Kafka answers at once with whatever is available; Tansu returns an empty response even "
    "when the partition holds data (a long-polling Fetch is answered normally).",
)
TANSU_AUTO_CREATE_PARTITIONS = Deviation(
    "tansu",
    "T14",
    "auto-created topics get 4 partitions",
    "Kafka creates them with num.partitions, 1 by default, so a producer that does not name "
    "a partition keeps one total order; on Tansu its records spread over 4 partitions. "
    "Tansu's broker command has no setting for it.",
)
TANSU_DESCRIBE_CONFIGS_DEFAULTS = Deviation(
    "tansu",
    "T15",
    "DescribeConfigs lists only a topic's overrides, not its defaults",
    "Kafka lists every topic config, defaults included (source DEFAULT_CONFIG). Admins "
    "reading cleanup.policy or max.message.bytes find nothing, and kafka-python's "
    "alter_configs, which checks names against that list, refuses max.message.bytes as "
    "'Unrecognized configs'.",
)
TANSU_DESCRIBE_GROUPS_EMPTY = Deviation(
    "tansu",
    "T16",
    "DescribeGroups leaves a stable group's protocol name and members' details empty",
    "For a Stable group with one member, Tansu answers protocol '' and a member with empty "
    "client id, client host, metadata and assignment (every version 0-5). Kafka names the "
    "chosen assignor (range, roundrobin) and returns each member's client id, host, "
    "subscription and assignment, which admin tools show.",
)
TANSU_OFFSET_FETCH_ALL_TOPICS = Deviation(
    "tansu",
    "T17",
    "OffsetFetch v2+ for all of a group's topics (null topic list) returns a truncated body",
    "The answer holds throttle time and error code but no topics array, so it cannot be "
    "parsed: aiokafka's list_consumer_group_offsets fails with a decode error and drops the "
    "connection. With an explicit topic list the answer is well formed.",
)
TANSU_CONSUMER_GROUP_DESCRIBE = Deviation(
    "tansu",
    "T18",
    "ConsumerGroupDescribe (69) answers for classic groups, with wrong contents",
    "librdkafka's describe_consumer_groups tries ConsumerGroupDescribe first when it is "
    "advertised (docs/protocol-notes.md §1.5) and falls back to DescribeGroups only on "
    "GROUP_ID_NOT_FOUND, which Kafka answers for a classic group. Tansu answers it: the "
    "assignor field holds the member id and the member list is empty.",
)

TANSU_DEVIATIONS: tuple[Deviation, ...] = (
    TANSU_LATEST_OFFSET,
    TANSU_ABORTED_TRANSACTIONS,
    TANSU_INIT_PRODUCER_ID_V0,
    TANSU_DELETE_RECORDS_V2,
    TANSU_API_VERSIONS_FALLBACK,
    TANSU_GENERATION_ZERO,
    TANSU_AUTHORIZED_OPERATIONS,
    TANSU_NO_ALTER_CONFIGS,
    TANSU_NO_CREATE_PARTITIONS,
    TANSU_OLD_LIBRDKAFKA,
    TANSU_MAX_MESSAGE_BYTES,
    TANSU_TIMESTAMP_LOOKUP,
    TANSU_IMMEDIATE_FETCH,
    TANSU_AUTO_CREATE_PARTITIONS,
    TANSU_DESCRIBE_CONFIGS_DEFAULTS,
    TANSU_DESCRIBE_GROUPS_EMPTY,
    TANSU_OFFSET_FETCH_ALL_TOPICS,
    TANSU_CONSUMER_GROUP_DESCRIBE,
)

# Deviations that break every scenario with these parameters, wherever they appear.
EVERYWHERE: tuple[tuple[Deviation, dict[str, object]], ...] = (
    (TANSU_OLD_LIBRDKAFKA, {"client": "kcat"}),
)


@dataclass(frozen=True, slots=True)
class IntendedDifference:
    """One of kshim's intended differences from Apache Kafka: a choice, not a gap.

    ``scenarios`` are fnmatch patterns over the report's scenario names
    (``test_module::test_name[params]``) whose kshim and Kafka verdicts the difference
    explains: on the broker ``fails_on`` the conftest expects them to fail (strict xfail,
    so a difference that goes away is noticed), and the report lists those disagreements
    apart from the unexplained ones, which fail the test run (report.py --check).
    """

    code: str
    what: str
    why: str
    scenarios: tuple[str, ...] = ()
    fails_on: str = "kshim"

    @property
    def reason(self) -> str:
        return f"kshim's intended difference {self.code}: {self.what}"


# kshim's intended differences from Apache Kafka, rendered into RESULTS.md: the allow-list of
# disagreements. An entry that names no scenario changes no verdict of the suite (the
# difference shows only in kshim's own tests or in the conformance probes).
KSHIM_INTENDED_DIFFERENCES: tuple[IntendedDifference, ...] = (
    IntendedDifference(
        "K1",
        "Fetch is advertised up to v12 and Produce up to v11",
        "No topic ids on the data path: Java then stays on name-based Fetch "
        "(docs/protocol-notes.md §0.8), and transactional Produce stays on protocol V1.",
    ),
    IntendedDifference(
        "K2",
        "Produce v0-v2 are advertised but refused (connection closed)",
        "As Kafka 4 does (KAFKA-18659): old librdkafka checks for those versions to enable "
        "compression, but no current client sends them.",
    ),
    IntendedDifference(
        "K4",
        "One node, no replication: leader and ISR are always this broker",
        "min.insync.replicas is accepted but only 1 is meaningful; acks=all means fsynced here.",
    ),
    IntendedDifference(
        "K5",
        "An acknowledged record is fsynced (flush.messages=1 by default)",
        "Kafka acknowledges after the page cache and relies on replication; kshim has no "
        "replicas, so acks wait for the disk.",
    ),
    IntendedDifference(
        "K6",
        "compression.type only accepts 'producer'",
        "Batches are stored as the producer compressed them; no broker-side recompression.",
    ),
    IntendedDifference(
        "K7",
        "Not advertised: OffsetForLeaderEpoch (23), DescribeCluster (60), "
        "ConsumerGroupDescribe (69), telemetry (71/72), DescribeTopicPartitions (75), "
        "SASL (17/36), ACLs, KIP-848 groups",
        "Advertising an API switches clients onto its code path (docs/protocol-notes.md §1.5); "
        "clients fall back to Metadata and DescribeGroups, which kshim serves.",
    ),
    IntendedDifference(
        "K8",
        "Transaction protocol V2 (KIP-890) is not offered",
        "No transaction.version feature is advertised, so every client stays on V1: "
        "AddPartitionsToTxn/AddOffsetsToTxn, EndTxn up to v4.",
    ),
    IntendedDifference(
        "K9",
        "An overdue transaction is reviewed before it is aborted",
        "With a review hook configured, a transaction past its timeout is committed or aborted "
        "as the hook decides (RocketMQ's half messages); without one kshim aborts, as Kafka does.",
    ),
    IntendedDifference(
        "K10",
        "group.initial.rebalance.delay.ms defaults to 200 (Kafka: 3000)",
        "A single-node broker for database synchronisation has little reason to wait for more "
        "members; a new group's first join completes after 200 ms.",
    ),
    IntendedDifference(
        "K11",
        "Topic names ending in .full and .delay are kshim's: CreateTopics refuses them, and "
        "CreatePartitions, DeleteTopics, AlterConfigs, IncrementalAlterConfigs and "
        "DeleteRecords refuse to change a view T.full or a delay companion T.delay, each "
        "with POLICY_VIOLATION and a message saying what to do (add partitions to T, ...)",
        "T.full is T's read-only compacted view and T.delay its write-only delay companion; "
        "Kafka has neither, so it creates such names and answers UNKNOWN_TOPIC_OR_PARTITION "
        "for the calls. kshim answers as Kafka does when its create.topic.policy refuses a "
        "topic (compat_tests/test_reserved_names.py runs Kafka 3.9 with such a policy). "
        "Where Kafka auto-creates a topic literally named T.delay, kshim creates T (its "
        "companion follows), and reading T.delay answers INVALID_TOPIC_EXCEPTION.",
    ),
    IntendedDifference(
        "K12",
        "No internal topics: __consumer_offsets and __transaction_state do not exist",
        "Committed offsets and transaction state live in LMDB: Metadata lists no internal "
        "topic, and CreatePartitions and the other admin calls answer "
        "UNKNOWN_TOPIC_OR_PARTITION for those names, where Kafka 3.9 lists them (is_internal) "
        "and even lets CreatePartitions grow them.",
    ),
    IntendedDifference(
        "K13",
        "The oldest versions Kafka 4.0 removed (KIP-896) are not advertised",
        "Fetch from v4, ListOffsets, OffsetFetch, DeleteTopics and the ACL and config APIs "
        "from v1, OffsetCommit and CreateTopics from v2: every client in use sends newer "
        "versions, and Kafka 3.9 still serves the old ones only for clients from before 2017.",
    ),
    IntendedDifference(
        "K14",
        "A topic Metadata auto-creates exists, with its partitions, in the same answer",
        "kshim is its own controller; Kafka in KRaft mode asks its controller and answers "
        "UNKNOWN_TOPIC_OR_PARTITION (or LEADER_NOT_AVAILABLE) meanwhile "
        "(AutoTopicCreationManager), so clients retry. Either is valid; a client sees its "
        "topic one round trip sooner on kshim.",
    ),
    IntendedDifference(
        "K15",
        "A CreatePartitions past one controller batch adds nothing",
        "Both answer UNKNOWN_SERVER_ERROR for a topic whose new partitions do not fit in the "
        "request's batch of 10,000 records, but Kafka 3.9 still writes the partition records "
        "that fit (seen: 10,000 of 10,001 asked for, and then 'Too many open files'); kshim "
        "adds none. Kafka also takes a request's topics in hash order, kshim in request "
        "order, and for a count its replica placer cannot allocate (2^31-1) fails the whole "
        "request over a controller failover (compat_tests/test_partition_limits.py).",
    ),
)


def deviates(deviation: Deviation, **params: Any) -> pytest.MarkDecorator:
    """Marks a scenario as broken by ``deviation`` on its broker when ``params`` match.

    ``params`` name parametrize arguments (``client="aiokafka"``); a value may be a tuple
    of acceptable values. The conftest applies xfail(strict=False) with the reason.
    """
    return pytest.mark.known_deviation(deviation, params)


def matches(params: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """True when every wanted parameter has (one of) the wanted value(s)."""
    for name, value in wanted.items():
        accepted = value if isinstance(value, tuple) else (value,)
        if params.get(name) not in accepted:
            return False
    return True

"""The conformance tests' view of a running broker: raw requests and the state they need.

A conformance case sends one request at the version under test; whatever state that
request needs (a topic with records, a stable group, an open transaction) is set up first
with raw requests at fixed helper versions, so that only the version under test varies.
"""

from __future__ import annotations

import functools
import time
import uuid
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from kshim.client.frames import decode_response, encode_body
from kshim.client.wire import WireConnection
from kshim.protocol import codec

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatchBuilder

CLIENT_ID = "kshim-compat"  # what the group cases expect members' client ids to start with
NODE_ID = 1  # kshim's default node.id
# An hour before this process started, on a whole second: records stamped years ago would be
# deleted by Kafka's time-based retention (log.retention.hours=168), which rolls even the
# active segment, whenever its retention check comes round during a probe.
BASE_TIMESTAMP_MS = (int(time.time()) - 3600) * 1000
SESSION_TIMEOUT_MS = 30_000
PROTOCOL = "range"
# ConsumerProtocolSubscription v0: one topic ("t"), no user data.
SUBSCRIPTION = b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"
# ConsumerProtocolAssignment v0: topic "t", partition 0, no user data.
ASSIGNMENT = b"\x00\x00\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x01\x00\x00\x00\x00\xff\xff\xff\xff"
INT32_MIN = -(2**31)
TOPIC_RESOURCE = 2
MEMBER_ID_REQUIRED = 79

# The fixed versions of the helper requests that set up state.
CREATE_TOPICS_V, PRODUCE_V, JOIN_V, SYNC_V, COMMIT_V = 5, 9, 5, 3, 8
INIT_PID_V, ADD_PARTITIONS_V, ADD_OFFSETS_V, METADATA_V, FIND_COORDINATOR_V = 4, 3, 3, 1, 1
LIST_OFFSETS_V, LATEST = 1, -1
# Errors of a Kafka broker that has not yet taken up a new partition, or a coordinator that
# is loading (https://kafka.apache.org/protocol#protocol_error_codes): setup retries them.
UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER = 3, 5, 6
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR = 14, 15, 16
CONCURRENT_TRANSACTIONS = 51
TRANSIENT_ERRORS = frozenset(
    {
        UNKNOWN_TOPIC_OR_PARTITION,
        LEADER_NOT_AVAILABLE,
        NOT_LEADER_OR_FOLLOWER,
        COORDINATOR_LOAD_IN_PROGRESS,
        COORDINATOR_NOT_AVAILABLE,
        NOT_COORDINATOR,
        CONCURRENT_TRANSACTIONS,
    }
)
SETTLE_TIMEOUT_S, SETTLE_POLL_S = 30.0, 0.05
GROUP_KEY, TRANSACTION_KEY = 0, 1  # FindCoordinator's key types
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Exchange:
    """One request at the version under test, and the full response it must get.

    ``expect`` receives the decoded response so that values no client can predict (a
    member id, a producer id) can be taken from it, after the case has checked them.
    """

    request: Mapping[str, Any]
    expect: Callable[[Any], Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class Producer:
    producer_id: int
    epoch: int


class Probe:
    """Raw requests to one broker, and names for what a case creates on it.

    Names are unique on the broker and repeatable: a case started with the same
    ``start_case`` id makes the same names in the same order, so that two brokers given
    the same case get the same requests, byte for byte.
    """

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.case = uuid.uuid4().hex[:10]
        self.made = 0

    @property
    def client_id(self) -> str:
        return CLIENT_ID

    def start_case(self, case: str) -> None:
        """Names made from now on are ``conformance-<case>-<label>-<n>``, n from 1."""
        self.case, self.made = case, 0

    def call(self, api_key: int, version: int, fields: Mapping[str, Any]) -> Any:
        """kio's decoded answer to one request built from ``fields``."""
        return decode_response(api_key, version, self.call_frame(api_key, version, fields))[1]

    def call_frame(self, api_key: int, version: int, fields: Mapping[str, Any]) -> bytes:
        """The answer's frame (its size prefix taken off) to one request from ``fields``."""
        body = encode_body(api_key, version, fields)
        flexible = codec.is_flexible(api_key, version)
        with WireConnection(self.host, self.port, client_id=CLIENT_ID) as connection:
            return connection.exchange(api_key, version, body, flexible=flexible)

    @property
    def prefix(self) -> str:
        """What every name made in the current case starts with."""
        return f"conformance-{self.case}-"

    def name(self, label: str) -> str:
        self.made += 1
        return f"{self.prefix}{label}-{self.made}"

    def create_topic(
        self, label: str, partitions: int = 1, configs: Mapping[str, str] | None = None
    ) -> str:
        topic = self.name(label)
        request = create_topic_request(topic, partitions, configs)
        [answer] = self.call(19, CREATE_TOPICS_V, request).topics
        assert int(answer.error_code) == 0, answer
        self.wait_for_leaders(topic, partitions)
        return topic

    def wait_for_leaders(self, topic: str, partitions: int = 1) -> None:
        """Returns once the broker leads every partition of ``topic``: Kafka's CreateTopics
        answers when the controller has the topic, a moment before the broker serves it
        (kshim serves it at once). Metadata shows a leader first; the broker's
        ReplicaManager takes the partitions up a moment later (KRaft's metadata publisher
        updates the metadata cache before it), and until then answers requests that read
        a partition (ListOffsets, DescribeProducers) NOT_LEADER_OR_FOLLOWER."""

        def described() -> Any:
            request = {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
            [answer] = self.call(3, METADATA_V, request).topics
            found = answer.partitions
            if not found or any(partition.leader_id < 0 for partition in found):
                return LEADER_NOT_AVAILABLE
            return answer.error_code

        def led() -> Any:
            wanted = [{"partition_index": i, "timestamp": LATEST} for i in range(partitions)]
            request = {"replica_id": -1, "topics": [{"name": topic, "partitions": wanted}]}
            [answer] = self.call(2, LIST_OFFSETS_V, request).topics
            errors = [int(partition.error_code) for partition in answer.partitions]
            return next((error for error in errors if error), 0)

        until_settled(described, lambda code: code)
        until_settled(led, lambda code: code)

    def produce(
        self,
        topic: str,
        count: int,
        producer: Producer | None = None,
        first_sequence: int = 0,
        transactional: bool = False,
        transactional_id: str | None = None,
    ) -> bytes:
        """Appends one batch of ``count`` records to partition 0; returns the batch sent."""
        batch = record_batch(count, producer, first_sequence, transactional)
        request = {
            "transactional_id": transactional_id,
            "acks": -1,
            "timeout": 10_000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
        }

        def produced() -> Any:
            [topic_answer] = self.call(0, PRODUCE_V, request).responses
            [partition] = topic_answer.partition_responses
            return partition

        partition = until_settled(produced, lambda partition: partition.error_code)
        assert int(partition.error_code) == 0, partition
        return batch

    def init_producer(self, transactional_id: str | None = None) -> Producer:
        request = {"transactional_id": transactional_id, "transaction_timeout": 60_000}
        response = until_settled(
            lambda: self.call(22, INIT_PID_V, request), lambda answer: answer.error_code
        )
        assert int(response.error_code) == 0, response
        return Producer(response.producer_id, response.producer_epoch)

    def wait_for_coordinators(self) -> None:
        """Returns once the group and the transaction coordinator answer: a new Kafka
        creates their internal topics on first use and loads them before it answers."""
        for key_type in (GROUP_KEY, TRANSACTION_KEY):
            request = {"key": self.name("coordinator"), "key_type": key_type}
            found = until_settled(
                functools.partial(self.call, 10, FIND_COORDINATOR_V, request),
                lambda answer: answer.error_code,
            )
            assert int(found.error_code) == 0, found
        self.init_producer(self.name("coordinator"))

    def add_partition(self, transactional_id: str, producer: Producer, topic: str) -> None:
        request = add_partitions_request(transactional_id, producer, topic)
        [result] = self.call(24, ADD_PARTITIONS_V, request).results_by_topic_v3_and_below
        assert [int(p.partition_error_code) for p in result.results_by_partition] == [0]

    def add_offsets(self, transactional_id: str, producer: Producer, group: str) -> None:
        request = transactional_request(transactional_id, producer, group_id=group)
        assert int(self.call(25, ADD_OFFSETS_V, request).error_code) == 0

    def join(self, group: str) -> tuple[str, int]:
        """A one-member group through JoinGroup v5 (two steps) and SyncGroup: Stable.

        Returns (member id, generation id).
        """
        request: dict[str, Any] = {
            "group_id": group,
            "session_timeout": SESSION_TIMEOUT_MS,
            "rebalance_timeout": SESSION_TIMEOUT_MS,
            "member_id": "",
            "protocol_type": "consumer",
            "protocols": [{"name": PROTOCOL, "metadata": SUBSCRIPTION}],
        }
        first = self.call(11, JOIN_V, request)
        assert int(first.error_code) == MEMBER_ID_REQUIRED, first
        joined = self.call(11, JOIN_V, {**request, "member_id": first.member_id})
        assert int(joined.error_code) == 0, joined
        sync = {
            "group_id": group,
            "generation_id": joined.generation_id,
            "member_id": joined.member_id,
            "assignments": [{"member_id": joined.member_id, "assignment": ASSIGNMENT}],
        }
        assert int(self.call(14, SYNC_V, sync).error_code) == 0
        return joined.member_id, joined.generation_id

    def commit(self, group: str, topic: str, offset: int, metadata: str = "meta") -> None:
        """A simple (group-less member) OffsetCommit: generation -1, no member id."""
        request = {
            "group_id": group,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": offset,
                            "committed_metadata": metadata,
                        }
                    ],
                }
            ],
        }
        [answer] = self.call(8, COMMIT_V, request).topics
        assert [int(p.error_code) for p in answer.partitions] == [0]


def create_topic_request(
    topic: str, partitions: int = 1, configs: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """CreateTopics of one topic with one replica, the broker's assignment, ``configs``."""
    created = {
        "name": topic,
        "num_partitions": partitions,
        "replication_factor": 1,
        "assignments": [],
        "configs": [{"name": name, "value": value} for name, value in (configs or {}).items()],
    }
    return {"topics": [created], "timeout": 10_000, "validate_only": False}


def add_partitions_request(transactional_id: str, producer: Producer, topic: str) -> dict[str, Any]:
    """AddPartitionsToTxn (v3 and below) adding partition 0 of ``topic``."""
    return {
        "v3_and_below_transactional_id": transactional_id,
        "v3_and_below_producer_id": producer.producer_id,
        "v3_and_below_producer_epoch": producer.epoch,
        "v3_and_below_topics": [{"name": topic, "partitions": [0]}],
    }


def transactional_request(
    transactional_id: str, producer: Producer, **fields: Any
) -> dict[str, Any]:
    """A request of a transaction's producer (AddOffsetsToTxn, EndTxn): its transactional
    id, producer id and epoch, and ``fields``."""
    return {
        "transactional_id": transactional_id,
        "producer_id": producer.producer_id,
        "producer_epoch": producer.epoch,
        **fields,
    }


def until_settled(call: Callable[[], T], error_of: Callable[[T], Any]) -> T:
    """``call()``'s first answer whose error (``error_of``) is not a transient one of a
    broker still taking up a partition or a coordinator; the last one after
    ``SETTLE_TIMEOUT_S``. Only Kafka answers those: kshim's partitions and coordinators
    are served from the start."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while True:
        answer = call()
        if int(error_of(answer)) not in TRANSIENT_ERRORS or time.monotonic() > deadline:
            return answer
        time.sleep(SETTLE_POLL_S)


def record_batch(
    count: int,
    producer: Producer | None = None,
    first_sequence: int = 0,
    transactional: bool = False,
) -> bytes:
    """A v2 record batch built by kafka-python (not by kshim), timestamps 1 s apart."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=transactional,
        producer_id=producer.producer_id if producer else -1,
        producer_epoch=producer.epoch if producer else -1,
        base_sequence=first_sequence if producer else -1,
        batch_size=1 << 20,
    )
    for index in range(count):
        timestamp = BASE_TIMESTAMP_MS + index * 1000
        builder.append(index, timestamp=timestamp, key=b"k%d" % index, value=b"v", headers=[])
    return bytes(builder.build())


def as_stored(batch: bytes, base_offset: int) -> bytes:
    """The batch as a broker returns it: base offset stamped, leader epoch 0 (single node)."""
    return base_offset.to_bytes(8, "big") + batch[8:12] + (0).to_bytes(4, "big") + batch[16:]

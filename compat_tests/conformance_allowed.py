"""Where kshim's answer to a conformance probe differs from Apache Kafka 3.9's on purpose.

Each entry names the API, the versions, the part of the answer (a path as
compat_tests/conformance_diff.py writes them; ``*`` matches any text) and, where pinned,
what each broker sends (rendered as in a Difference; None: any value), with the reason.
``code`` points at the intended difference in compat_tests/deviations.py it follows, when
one does. A difference matched by no entry fails the differential test; so does an entry
that matched nothing at a version it names (the difference is gone: delete the entry),
unless it is marked ``being_fixed`` (work under way elsewhere may remove it any time).
``KNOWN_GAPS`` are the differences kshim does not mean to have, larger than a fix made
beside the probes; they are allowed on the same terms, so that only a new one fails.

The reference is Kafka 3.9.2 from the pinned jars (kshim/jvm/poms/kafka.xml), configured as
its sample config/kraft/server.properties (kshim/jvm/kafka_server.py); another Kafka
(KSHIM_KAFKA_BOOTSTRAP, KSHIM_KAFKA_CMD) may differ in ways this list does not know.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from compat_tests.conformance_diff import ABSENT, Difference

EVERY_VERSION = (0, 2**15 - 1)
MAIN_CASE = ""


@dataclass(frozen=True, slots=True)
class Allowed:
    api_key: int
    path: str
    kshim: str | None
    kafka: str | None
    why: str
    code: str | None = None
    versions: tuple[int, int] = EVERY_VERSION
    being_fixed: bool = False
    case: str = MAIN_CASE  # the label of the case in ERROR_CASES, "" for CASES'

    def covers(self, api_key: int, version: int, case: str) -> bool:
        low, high = self.versions
        return api_key == self.api_key and low <= version <= high and case == self.case

    def matches(self, difference: Difference) -> bool:
        return (
            glob_matches(self.path, difference.path)
            and self.kshim in (None, difference.kshim)
            and self.kafka in (None, difference.kafka)
        )


def glob_matches(pattern: str, path: str) -> bool:
    """True when ``path`` is ``pattern`` with each ``*`` standing for any text."""
    expression = ".*".join(re.escape(piece) for piece in pattern.split("*"))
    return re.fullmatch(expression, path) is not None


METADATA, API_VERSIONS, CREATE_TOPICS = 3, 18, 19
KIP_896 = (
    "Kafka 4.0 removed this API's oldest versions (KIP-896) and kshim, built for current "
    "clients, never served them; Kafka 3.9 still does"
)


def _range(key: int, part: str, kshim: int, kafka: int, why: str, code: str | None) -> Allowed:
    return Allowed(API_VERSIONS, f"api_keys[{key}].{part}", str(kshim), str(kafka), why, code)


def _kafka_only_api(key: int, name: str, why: str, code: str | None = None) -> Allowed:
    return Allowed(API_VERSIONS, f"api_keys[{key}]", ABSENT, None, f"{name}: {why}", code)


NOT_IMPLEMENTED = "not implemented, so not advertised (kshim/protocol/apis.py)"
BROKER_TO_BROKER = "sent between brokers and controllers only; kshim is one node"

API_VERSIONS_RANGES = (
    _range(1, "min_version", 4, 0, KIP_896, "K13"),
    _range(1, "max_version", 12, 17, "no topic ids on the data path", "K1"),
    _range(2, "min_version", 1, 0, KIP_896, "K13"),
    _range(8, "min_version", 2, 0, KIP_896, "K13"),
    _range(9, "min_version", 1, 0, KIP_896, "K13"),
    _range(19, "min_version", 2, 0, KIP_896, "K13"),
    _range(20, "min_version", 1, 0, KIP_896, "K13"),
    _range(24, "max_version", 3, 5, "v4+ are transaction protocol V2 (KIP-890)", "K8"),
    _range(29, "min_version", 1, 0, KIP_896, "K13"),
    _range(30, "min_version", 1, 0, KIP_896, "K13"),
    _range(31, "min_version", 1, 0, KIP_896, "K13"),
    _range(32, "min_version", 1, 0, KIP_896, "K13"),
    _range(66, "max_version", 0, 1, "v1's DurationFilter (KIP-994) is not implemented", None),
)

API_VERSIONS_KAFKA_ONLY = (
    _kafka_only_api(23, "OffsetForLeaderEpoch", "clients fall back to Metadata", "K7"),
    _kafka_only_api(27, "WriteTxnMarkers", BROKER_TO_BROKER),
    _kafka_only_api(34, "AlterReplicaLogDirs", "one log directory, no replicas (K4)"),
    _kafka_only_api(35, "DescribeLogDirs", NOT_IMPLEMENTED),
    _kafka_only_api(38, "CreateDelegationToken", NOT_IMPLEMENTED),
    _kafka_only_api(39, "RenewDelegationToken", NOT_IMPLEMENTED),
    _kafka_only_api(40, "ExpireDelegationToken", NOT_IMPLEMENTED),
    _kafka_only_api(41, "DescribeDelegationToken", NOT_IMPLEMENTED),
    _kafka_only_api(43, "ElectLeaders", "one node: no leader to elect (K4)"),
    _kafka_only_api(45, "AlterPartitionReassignments", "one node: nothing to move (K4)"),
    _kafka_only_api(46, "ListPartitionReassignments", "one node: nothing to move (K4)"),
    _kafka_only_api(48, "DescribeClientQuotas", NOT_IMPLEMENTED),
    _kafka_only_api(49, "AlterClientQuotas", NOT_IMPLEMENTED),
    _kafka_only_api(55, "DescribeQuorum", "no KRaft quorum in kshim"),
    _kafka_only_api(57, "UpdateFeatures", "no features are offered (K8)"),
    _kafka_only_api(60, "DescribeCluster", "clients fall back to Metadata", "K7"),
    _kafka_only_api(64, "UnregisterBroker", BROKER_TO_BROKER),
    _kafka_only_api(68, "ConsumerGroupHeartbeat", "KIP-848 groups", "K7"),
    _kafka_only_api(69, "ConsumerGroupDescribe", "clients fall back to DescribeGroups", "K7"),
    _kafka_only_api(74, "ListClientMetricsResources", "no client telemetry (KIP-714)", "K7"),
    _kafka_only_api(75, "DescribeTopicPartitions", "clients fall back to Metadata", "K7"),
    _kafka_only_api(80, "AddRaftVoter", "no KRaft quorum in kshim"),
    _kafka_only_api(81, "RemoveRaftVoter", "no KRaft quorum in kshim"),
)

NO_FEATURES = (
    "kshim offers no features, so no client turns on transaction protocol V2; Kafka lists "
    "its supported and finalized ones (metadata.version, kraft.version, ...)"
)
API_VERSIONS_FEATURES = tuple(
    Allowed(API_VERSIONS, name, ABSENT, None, NO_FEATURES, "K8", versions=(3, 4))
    for name in ("supported_features", "finalized_features_epoch", "finalized_features")
)

CREATED_CONFIG = "topics[*].configs"
TOPIC_CONFIGS_MISSING = {
    "compression.gzip.level": "compression levels (KIP-390): batches are stored as sent (K6)",
    "compression.lz4.level": "compression levels (KIP-390): batches are stored as sent (K6)",
    "compression.zstd.level": "compression levels (KIP-390): batches are stored as sent (K6)",
    "file.delete.delay.ms": "segments are deleted at once: no delayed file deletion",
    "follower.replication.throttled.replicas": "no replication (K4)",
    "leader.replication.throttled.replicas": "no replication (K4)",
    "unclean.leader.election.enable": "no replication (K4)",
    "index.interval.bytes": "kshim's offset index has its own spacing, not a topic setting",
    "segment.index.bytes": "kshim's offset index has its own size, not a topic setting",
    "preallocate": "segments are not preallocated",
    "segment.jitter.ms": "segments roll by size and time without jitter",
    "local.retention.bytes": "no tiered storage (KIP-405)",
    "local.retention.ms": "no tiered storage (KIP-405)",
    "remote.storage.enable": "no tiered storage (KIP-405)",
    "remote.log.copy.disable": "no tiered storage (KIP-405)",
    "remote.log.delete.on.disable": "no tiered storage (KIP-405)",
    "message.downconversion.enable": "no down-conversion: Fetch v4+ only (KIP-896)",
    "message.format.version": "record batches v2 only; deprecated in Kafka 3 (KIP-724)",
    "message.timestamp.difference.max.ms": "deprecated in Kafka 3.6 (KIP-937); "
    "message.timestamp.before/after.max.ms are listed",
}
CREATE_TOPICS_CONFIGS = (
    *(
        Allowed(
            CREATE_TOPICS,
            f"{CREATED_CONFIG}[{name!r}]",
            ABSENT,
            None,
            f"a topic config kshim does not have: {why}",
            versions=(5, 7),
        )
        for name, why in TOPIC_CONFIGS_MISSING.items()
    ),
    Allowed(
        CREATE_TOPICS,
        f"{CREATED_CONFIG}['kshim.full.view']",
        None,
        ABSENT,
        "kshim's own topic config: whether the topic has a compacted T.full view",
        versions=(5, 7),
    ),
    Allowed(
        CREATE_TOPICS,
        f"{CREATED_CONFIG}['flush.messages'].value",
        "'1'",
        "'9223372036854775807'",
        "an acknowledged record is fsynced",
        "K5",
        versions=(5, 7),
    ),
    Allowed(
        CREATE_TOPICS,
        f"{CREATED_CONFIG}['flush.ms'].value",
        "'0'",
        "'9223372036854775807'",
        "an acknowledged record is fsynced",
        "K5",
        versions=(5, 7),
    ),
)

# Differences kshim does not mean to have but that are larger than a fix beside these
# probes: listed so that CI fails on new differences only. Each says what Kafka does.
KNOWN_GAPS: tuple[Allowed, ...] = ()

SYNCHRONOUS_CREATION = (
    "kshim is its own controller: a topic Metadata auto-creates (v0-3 always ask for it) "
    "exists, with its partitions, before the answer. Kafka in KRaft mode asks its controller "
    "and answers UNKNOWN_TOPIC_OR_PARTITION meanwhile (AutoTopicCreationManager), so "
    "clients retry"
)
METADATA_AUTO_CREATION = (
    Allowed(
        METADATA,
        "topics[*].error_code",
        "NONE(0)",
        "UNKNOWN_TOPIC_OR_PARTITION(3)",
        SYNCHRONOUS_CREATION,
        "K14",
        versions=(0, 3),
        case="metadata-unknown-topic",
    ),
    Allowed(
        METADATA,
        "topics[*].partitions[0]",
        None,
        ABSENT,
        SYNCHRONOUS_CREATION,
        "K14",
        versions=(0, 3),
        case="metadata-unknown-topic",
    ),
)

ALLOWED: tuple[Allowed, ...] = (
    *API_VERSIONS_RANGES,
    *API_VERSIONS_KAFKA_ONLY,
    *API_VERSIONS_FEATURES,
    *CREATE_TOPICS_CONFIGS,
    *METADATA_AUTO_CREATION,
    *KNOWN_GAPS,
)


def unexplained(
    api_key: int,
    version: int,
    found: Iterable[Difference],
    case: str = MAIN_CASE,
    allowed: Iterable[Allowed] = ALLOWED,
) -> tuple[list[Difference], list[Allowed]]:
    """(the differences no entry allows, the entries for this API, version and case that
    allowed none of ``found`` and are not being fixed)."""
    entries = [entry for entry in allowed if entry.covers(api_key, version, case)]
    used: set[Allowed] = set()
    left = []
    for difference in found:
        matching = [entry for entry in entries if entry.matches(difference)]
        used.update(matching)
        if not matching:
            left.append(difference)
    stale = [entry for entry in entries if entry not in used and not entry.being_fixed]
    return left, stale

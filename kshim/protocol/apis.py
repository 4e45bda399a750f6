"""The APIs kshim serves and the version range of each, as advertised in ApiVersions.

Advertise only what is implemented: some APIs switch clients onto other code
paths (docs/protocol-notes.md §1.5). Produce advertises v0-2 for old librdkafka feature
detection but serves v3+ only, as Kafka 4 does (KAFKA-18659); a lower version that really
arrives closes the connection. Fetch stops at v12 and Produce at v11 so no
client switches to topic ids.
"""

from __future__ import annotations

ADVERTISED: dict[int, tuple[int, int]] = {
    0: (0, 11),  # Produce
    1: (4, 12),  # Fetch
    2: (1, 9),  # ListOffsets
    3: (0, 12),  # Metadata
    8: (2, 9),  # OffsetCommit (v10 uses topic ids)
    9: (1, 9),  # OffsetFetch (v10 uses topic ids)
    10: (0, 6),  # FindCoordinator
    11: (0, 9),  # JoinGroup
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    15: (0, 5),  # DescribeGroups (v6 answers GROUP_ID_NOT_FOUND; not needed)
    16: (0, 5),  # ListGroups
    18: (0, 4),  # ApiVersions
    19: (2, 7),  # CreateTopics
    20: (1, 6),  # DeleteTopics
    21: (0, 2),  # DeleteRecords
    22: (0, 5),  # InitProducerId
    32: (1, 4),  # DescribeConfigs
    33: (0, 2),  # AlterConfigs
    37: (0, 3),  # CreatePartitions
    42: (0, 2),  # DeleteGroups
    44: (0, 1),  # IncrementalAlterConfigs
    24: (0, 3),  # AddPartitionsToTxn (v4+ are broker-to-broker, KIP-890)
    25: (0, 4),  # AddOffsetsToTxn
    26: (0, 4),  # EndTxn (v5 is transaction protocol V2, not offered)
    28: (0, 4),  # TxnOffsetCommit
    61: (0, 0),  # DescribeProducers
    65: (0, 0),  # DescribeTransactions
    66: (0, 0),  # ListTransactions
    47: (0, 0),  # OffsetDelete
    17: (0, 1),  # SaslHandshake (v0: raw SASL tokens follow; v1: in SaslAuthenticate)
    36: (0, 2),  # SaslAuthenticate (v1+: session lifetime, KIP-368)
    29: (1, 3),  # DescribeAcls (v0 is gone from Kafka 4 and kio)
    30: (1, 3),  # CreateAcls
    31: (1, 3),  # DeleteAcls
    50: (0, 0),  # DescribeUserScramCredentials (KIP-554)
    51: (0, 0),  # AlterUserScramCredentials (KIP-554)
}

MIN_SERVED: dict[int, int] = {0: 3}
API_VERSIONS_KEY = 18
PRODUCE_KEY = 0


METADATA_KEY = 3


# Messages kshim encodes or decodes with its own code instead of kio's, so their bytes are
# never copied: Produce's record batches in (produce_request.py) and Fetch's out
# (fetch_response.py), Produce's answer (produce_response.py); and Metadata requests, whose
# thousands of topic names are kept as strings (metadata_request.py). Metadata's answer is
# written by hand too (metadata_response.py) but from the typed response classes, so it
# is not listed here.
HAND_ENCODED = frozenset(
    {
        (PRODUCE_KEY, "request"),
        (PRODUCE_KEY, "response"),
        (1, "response"),
        (METADATA_KEY, "request"),
    }
)


def served_range(api_key: int) -> tuple[int, int]:
    """The lowest and highest version of ``api_key`` kshim decodes and answers."""
    low, high = ADVERTISED[api_key]
    return max(low, MIN_SERVED.get(api_key, low)), high


def serves(api_key: int, version: int) -> bool:
    """True when kshim decodes and answers this API version."""
    if api_key not in ADVERTISED:
        return False
    low, high = served_range(api_key)
    return low <= version <= high


def served_versions() -> list[tuple[int, int]]:
    """Every (api key, version) kshim decodes and answers."""
    return [
        (api_key, version)
        for api_key in ADVERTISED
        for version in range(served_range(api_key)[0], served_range(api_key)[1] + 1)
    ]

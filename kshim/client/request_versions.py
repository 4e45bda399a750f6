"""The (API key, version) of each request kshim's admin clients, reader and writer send.

Each is a version that kshim and Apache Kafka 3.x and 4.x all serve (Kafka 4.0 dropped the
oldest ones, KIP-896); the module that sends a request says why it takes that version.
The SASL requests of a connection's login are in ``wire``.
"""

from __future__ import annotations

PRODUCE = (0, 9)
FETCH = (1, 12)  # the last version without topic ids (KIP-516)
LIST_OFFSETS = (2, 5)
METADATA = (3, 11)  # served since Kafka 2.8
OFFSET_COMMIT = (8, 8)
OFFSET_FETCH = (9, 7)
FIND_COORDINATOR = (10, 4)
DESCRIBE_GROUPS = (15, 5)
LIST_GROUPS = (16, 4)
API_VERSIONS = (18, 2)
CREATE_TOPICS = (19, 7)
DELETE_TOPICS = (20, 6)  # topics by name or id (KIP-516)
END_TXN = (26, 3)  # flexible since v3 (KIP-482)
WRITE_TXN_MARKERS = (27, 1)
DESCRIBE_ACLS = (29, 3)  # KIP-373's USER resource type; flexible since v2 (KIP-482)
CREATE_ACLS = (30, 3)
DELETE_ACLS = (31, 3)
DESCRIBE_CONFIGS = (32, 4)
DELETE_GROUPS = (42, 2)
INCREMENTAL_ALTER_CONFIGS = (44, 1)  # KIP-339
DESCRIBE_USER_SCRAM_CREDENTIALS = (50, 0)  # KIP-554
ALTER_USER_SCRAM_CREDENTIALS = (51, 0)
DESCRIBE_PRODUCERS = (61, 0)  # KIP-664, as are the two below
DESCRIBE_TRANSACTIONS = (65, 0)
LIST_TRANSACTIONS = (66, 0)

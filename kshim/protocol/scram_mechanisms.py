"""The SCRAM mechanisms by KIP-554's numbers, as DescribeUserScramCredentials and
AlterUserScramCredentials carry them (Kafka's org.apache.kafka.clients.admin.ScramMechanism
.type): what the broker and the admin client both need to read and write those fields."""

from __future__ import annotations

SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
MECHANISM_TYPES: dict[int, str] = {1: SCRAM_SHA_256, 2: SCRAM_SHA_512}
MECHANISMS = tuple(MECHANISM_TYPES.values())


def mechanism_type(mechanism: str) -> int:
    """KIP-554's number of a mechanism name; raises ValueError for an unknown one."""
    for number, name in MECHANISM_TYPES.items():
        if name == mechanism:
            return number
    raise ValueError(f"{mechanism!r} is not one of {', '.join(MECHANISMS)}")

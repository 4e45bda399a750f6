"""Which partition a keyed record goes to, as Kafka's Java producer chooses it
(``BuiltInPartitioner.partitionForKey``: murmur2 of the key bytes, made non-negative,
modulo the partition count), so that ``kshim produce`` puts a key where Spark, Kafka
Connect and every Java client put it.

Murmur2 here is Kafka's variant (``org.apache.kafka.common.utils.Utils.murmur2``): its
initial hash 0x9747b28c (SEED), little-endian 4-byte words, and the tail mixed in as
Java's switch fall-through does.
"""

from __future__ import annotations

SEED = 0x9747B28C
MULTIPLIER = 0x5BD1E995
SHIFT = 24
MASK_32 = 0xFFFFFFFF
POSITIVE = 0x7FFFFFFF  # Utils.toPositive: the sign bit cleared, not the absolute value


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 of ``data`` as a signed 32-bit integer (Java's int)."""
    length = len(data)
    hashed = (SEED ^ length) & MASK_32
    whole = length - length % 4
    for start in range(0, whole, 4):
        word = int.from_bytes(data[start : start + 4], "little")
        word = (word * MULTIPLIER) & MASK_32
        word ^= word >> SHIFT
        word = (word * MULTIPLIER) & MASK_32
        hashed = ((hashed * MULTIPLIER) & MASK_32) ^ word
    tail = data[whole:]
    if tail:
        for index in reversed(range(len(tail))):
            hashed ^= tail[index] << (8 * index)
        hashed = (hashed * MULTIPLIER) & MASK_32
    hashed ^= hashed >> 13
    hashed = (hashed * MULTIPLIER) & MASK_32
    hashed ^= hashed >> 15
    return hashed - (1 << 32) if hashed & 0x80000000 else hashed


def partition_for_key(key: bytes, partition_count: int) -> int:
    """The partition of a record with ``key`` among ``partition_count`` partitions."""
    return (murmur2(key) & POSITIVE) % partition_count

"""The log cleaner's key map: for each key of the dirty part of a log, its latest offset.

Kafka's SkimpyOffsetMap: keys are kept as a fixed-width digest (SHA-256, as the full-data
view indexes keys by: ``meta/lmdb_keys.key_digest``), never as the keys themselves, and
the map has a fixed capacity derived from ``log.cleaner.dedupe.buffer.size``, so one
cleaning pass holds a bounded amount of memory whatever its log holds. When the map is full the pass
stops there (``latest_offset``) and the next pass goes on from that point. Two keys with
the same digest would be taken for one: with 256-bit digests that is never expected.
"""

from __future__ import annotations

from hashlib import sha256

# Bytes one entry costs in a Python dict (a 32-byte digest object, an int and the dict's
# slot), measured with tracemalloc over 200,000 entries: Kafka's entry is 24 bytes (an
# MD5 digest and a long), so the same buffer holds about six times fewer keys here.
ENTRY_BYTES = 150
# Kafka fills its map to log.cleaner.io.buffer.load.factor (0.9) of its slots; a dict does
# not degrade when full, but the budget is kept the same.
LOAD_FACTOR = 0.9
NOT_FOUND = -1


def capacity_for(buffer_bytes: int) -> int:
    """How many keys a map of ``buffer_bytes`` (log.cleaner.dedupe.buffer.size) holds;
    at least one, so that every pass makes progress."""
    return max(int(buffer_bytes * LOAD_FACTOR) // ENTRY_BYTES, 1)


class OffsetMap:
    """Key digest -> the latest offset seen for it, up to ``capacity`` keys. Not
    thread-safe: one pass uses it in one worker thread."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._offsets: dict[bytes, int] = {}
        self.latest_offset = NOT_FOUND  # every offset up to this one has been put

    def __len__(self) -> int:
        return len(self._offsets)

    def put(self, key: bytes, offset: int) -> bool:
        """Records ``offset`` as the key's latest; returns False, changing nothing, when the
        key is new and the map is full."""
        digest = sha256(key).digest()
        if len(self._offsets) >= self.capacity and digest not in self._offsets:
            return False
        self._offsets[digest] = offset
        self.latest_offset = max(self.latest_offset, offset)
        return True

    def covered(self, offset: int) -> None:
        """Every offset up to ``offset`` has been looked at (a batch without keys, a control
        batch, a gap): the map's coverage moves on."""
        self.latest_offset = max(self.latest_offset, offset)

    def get(self, key: bytes) -> int:
        """The latest offset put for ``key``, or NOT_FOUND."""
        return self._offsets.get(sha256(key).digest(), NOT_FOUND)

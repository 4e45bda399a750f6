"""Deleting contiguous key ranges from an LMDB table, inside the caller's transaction.

Every layout in lmdb_keys puts a name's (or a partition's) keys in one contiguous,
numerically ordered range, so removing a topic, a group or a partition's old entries
is one cursor walk from the range's first key.
"""

from __future__ import annotations

from collections.abc import Callable

from kshim.storage.meta.lmdb_types import Cursor


def delete_prefixed(cursor: Cursor, prefix: bytes) -> int:
    """Deletes every key starting with ``prefix``; returns how many."""
    return _delete_while(cursor, prefix, lambda key: key.startswith(prefix))


def delete_between(cursor: Cursor, start: bytes, stop: bytes) -> int:
    """Deletes every key in [start, stop); returns how many."""
    return _delete_while(cursor, start, lambda key: key < stop)


def _delete_while(cursor: Cursor, start: bytes, inside: Callable[[bytes], bool]) -> int:
    deleted = 0
    if not cursor.set_range(start):
        return 0
    # A cursor past the last key reports b"" as its key.
    while (key := cursor.key()) and inside(key):
        if not cursor.delete():
            break
        deleted += 1
    return deleted

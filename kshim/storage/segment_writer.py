"""Making a partition's appended batches durable: segment files, fsync, index, seal.

Each flush round of the partition log hands its pending batches to ``write``:
they go to the end of their segment files, one fsync per file makes them
durable, and only then are their entries appended to each segment's index
file ("the index trails the fsync", index_file.py). A rolled segment, once
everything in it is durable and indexed, gets its memory-mapped sealed index
(sealed_index.py) and its index file goes.
"""

from __future__ import annotations

import logging
import threading

from kshim.storage.filesystem import FileSystem
from kshim.storage.index_file import IndexEntry, decode_blocks, encode_block, index_path_for
from kshim.storage.sealed_index import decode_sealed_index, encode_sealed_index, sealed_path_for
from kshim.storage.segment import Segment

log = logging.getLogger(__name__)

# An appended batch waiting for a flush round: its segment, stored bytes and index entry.
PendingBatch = tuple[Segment, bytes, IndexEntry]
# A written batch whose index entry waits for an fsync: (segment, entry, end position).
UnindexedBatch = tuple[Segment, IndexEntry, int]


class SegmentWriter:
    """Writes, fsyncs, indexes and seals one partition's segment files.

    Threads: ``write``, ``sync`` and ``close`` run one at a time (the log's flusher, on
    the event loop or in a worker thread, then its close); ``roll`` and the properties
    may be used from the event loop meanwhile.
    """

    def __init__(
        self,
        filesystem: FileSystem,
        directory: str,
        segments: list[Segment],
        unindexed: list[UnindexedBatch],
    ) -> None:
        """``segments`` and ``unindexed`` are what recovery found: rolled segments not
        yet sealed are sealed after the next fsync, and ``unindexed`` batches indexed."""
        self._fs = filesystem
        self._directory = directory
        self._unindexed = unindexed
        self._unsynced_paths: set[str] = set()  # written but not fsynced
        self._descriptors: dict[str, int] = {}  # open for appending, by path
        self._active = segments[-1]  # the segment appends go to
        self._to_seal = [segment for segment in segments[:-1] if not segment.sealed]
        self._seal_lock = threading.Lock()  # guards _to_seal, which roll() extends

    @property
    def sealing_due(self) -> bool:
        """Whether a rolled segment still waits for its sealed index."""
        return bool(self._to_seal)

    @property
    def has_unsynced(self) -> bool:
        """Whether a write awaits an fsync (only when flush.messages > 1)."""
        return bool(self._unsynced_paths)

    def roll(self, rolled: Segment, active: Segment) -> None:
        """Event loop: appends go to ``active`` from now on; ``rolled``, which takes no
        more, is sealed once everything in it is durable."""
        with self._seal_lock:
            self._to_seal.append(rolled)
        self._active = active

    def write(self, pending: list[PendingBatch], sync: bool) -> None:
        """Appends pending batches to their segment files and, if ``sync``, fsyncs every
        file written since the last fsync, indexes what is now durable and seals the
        rolled segments that are complete."""
        groups: dict[str, list[bytes | memoryview]] = {}
        for segment, data, entry in pending:
            groups.setdefault(segment.path, []).append(data)
            self._unindexed.append((segment, entry, entry.position + len(data)))
        for path, chunks in groups.items():
            descriptor, created = self._descriptor(path)
            self._fs.write(descriptor, chunks)
            self._unsynced_paths.add(path)
            if created:
                self._fs.fsync_directory(self._directory)
        if sync:
            self.sync()
        self._close_rolled()
        if sync:
            self._seal_ready_segments()

    def sync(self) -> None:
        """Fsyncs every file written since the last fsync, rolled segments included, then
        indexes the batches that are now durable."""
        for path in sorted(self._unsynced_paths):
            self._fs.fsync(self._descriptors[path])
        self._unsynced_paths.clear()
        self._write_index()

    def close(self) -> None:
        """Closes every file open for appending."""
        descriptors = list(self._descriptors.values())
        self._descriptors.clear()
        for descriptor in descriptors:
            self._fs.close(descriptor)

    def _write_index(self) -> None:
        """Appends one index block per segment for the durable batches."""
        blocks: dict[str, tuple[Segment, list[IndexEntry], int]] = {}
        for segment, entry, end_position in self._unindexed:
            _, entries, _ = blocks.setdefault(segment.path, (segment, [], 0))
            entries.append(entry)
            blocks[segment.path] = (segment, entries, end_position)
        self._unindexed = []
        for segment, entries, end_position in blocks.values():
            descriptor, _ = self._descriptor(index_path_for(segment.path))
            self._fs.write(descriptor, [encode_block(entries, end_position)])
            segment.indexed_count += len(entries)

    def _seal_ready_segments(self) -> None:
        """Maps a sealed index for each rolled segment that is fully written, fsynced
        and indexed."""
        with self._seal_lock:
            candidates, self._to_seal = self._to_seal, []
        waiting = []
        for segment in candidates:
            ready = segment.path not in self._unsynced_paths and segment.indexed_count == len(
                segment.batch_offsets
            )
            if not ready:
                waiting.append(segment)
            elif not self._seal(segment):
                log.warning("%s: index incomplete; keeping it in memory", segment.path)
        with self._seal_lock:
            self._to_seal[:0] = waiting

    def _seal(self, segment: Segment) -> bool:
        """Writes, fsyncs and maps the segment's sealed index."""
        index_path = index_path_for(segment.path)
        descriptor = self._fs.open_read(index_path)
        try:
            data = self._fs.pread(descriptor, self._fs.size(index_path), 0)
        finally:
            self._fs.close(descriptor)
        entries, end_position, _ = decode_blocks(data, segment.size)
        if len(entries) != len(segment.batch_offsets) or end_position != segment.size:
            return False
        sealed_path = sealed_path_for(segment.path)
        if self._fs.exists(sealed_path):
            self._fs.remove(sealed_path)
        descriptor = self._fs.open_append(sealed_path)
        try:
            self._fs.write(descriptor, [encode_sealed_index(segment, entries)])
            self._fs.fsync(descriptor)
        finally:
            self._fs.close(descriptor)
        self._fs.fsync_directory(self._directory)
        index = decode_sealed_index(
            self._fs.map_file(sealed_path), segment.base_offset, verify=False
        )
        if index is None:
            return False
        index.adopt_into(segment)
        self._fs.remove(index_path)  # superseded; if the removal is lost it is merely ignored
        return True

    def _descriptor(self, path: str) -> tuple[int, bool]:
        """The file's descriptor for appending, and whether it was opened just now."""
        descriptor = self._descriptors.get(path)
        if descriptor is not None:
            return descriptor, False
        descriptor = self._fs.open_append(path)
        self._descriptors[path] = descriptor
        return descriptor, True

    def _close_rolled(self) -> None:
        """Closes the files of rolled segments once nothing of theirs awaits an fsync."""
        active = self._active.path
        keep = {active, index_path_for(active), *self._unsynced_paths}
        for path in [path for path in self._descriptors if path not in keep]:
            self._fs.close(self._descriptors.pop(path))

"""A partition's segment files: batches spilled to them, then indexed and sealed once durable.

Batches are durable first in the shared write-ahead log (write_ahead_log.py). The store
later spills them from the memtable to the end of their segment files with ``write``,
unsynced; at a checkpoint it makes every written file durable at once and calls
``synced``, which appends the batches' entries to each segment's index file ("the index
trails the fsync", index_file.py) and seals the rolled segments that are now complete:
their memory-mapped sealed index (sealed_index.py) is written and the index file goes.

Files are opened through the store's descriptor cache, so a writer holds no descriptor
between calls.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence

from kshim.storage.files.filesystem import FileSystem
from kshim.storage.log.descriptor_cache import DescriptorCache
from kshim.storage.log.index_file import IndexEntry, decode_blocks, encode_block, index_path_for
from kshim.storage.log.sealed_index import decode_sealed_index, encode_sealed_index, sealed_path_for
from kshim.storage.log.segment import Segment

log = logging.getLogger(__name__)

# An appended batch waiting to be spilled: its segment, stored bytes and index entry.
PendingBatch = tuple[Segment, bytes, IndexEntry]
# A written batch whose index entry waits for a sync: (segment, entry, end position).
UnindexedBatch = tuple[Segment, IndexEntry, int]


class SegmentWriter:
    """Writes, indexes and seals one partition's segment files.

    Threads: ``write``, ``synced`` and ``forget_segments`` run one at a time (the store's
    spill worker); ``roll`` and the properties may be used from the event loop meanwhile.
    """

    def __init__(
        self,
        filesystem: FileSystem,
        descriptors: DescriptorCache,
        directory: str,
        segments: list[Segment],
        unindexed: list[UnindexedBatch],
    ) -> None:
        """``segments`` and ``unindexed`` are what recovery found: batches not yet in an
        index file are indexed, and rolled segments not yet sealed sealed, after the next
        sync."""
        self._fs = filesystem
        self._descriptors = descriptors
        self.directory = directory
        self._unindexed = unindexed
        # Written but not yet synced: the recovered batches count, as recovery does not
        # sync what it scanned or replayed.
        self._unsynced_paths = {segment.path for segment, _, _ in unindexed}
        self._to_seal = [segment for segment in segments[:-1] if not segment.sealed]
        self._seal_lock = threading.Lock()  # guards _to_seal, which roll() extends
        # Segment files whose directory entry is known durable (the store synced the
        # directory since they were created); recovery syncs nothing, so none at first.
        self._listed_durably: set[str] = set()
        # Unsynced paths (still to be indexed at the next ``synced``) whose every written
        # byte ``write_durably`` has made durable meanwhile.
        self._fsynced: set[str] = set()

    @property
    def unsynced_paths(self) -> frozenset[str]:
        """Segment files written since the last ``synced``."""
        return frozenset(self._unsynced_paths)

    def roll(self, rolled: Segment) -> None:
        """Event loop: ``rolled`` takes no more appends; it is sealed once everything in it
        is written, durable and indexed."""
        with self._seal_lock:
            self._to_seal.append(rolled)

    def write(self, pending: Sequence[PendingBatch]) -> None:
        """Appends the batches to the end of their segment files, unsynced."""
        groups: dict[str, list[bytes | memoryview]] = {}
        for segment, data, entry in pending:
            groups.setdefault(segment.path, []).append(data)
            self._unindexed.append((segment, entry, entry.position + len(data)))
        for path, chunks in groups.items():
            with self._descriptors.using(path, writable=True) as descriptor:
                self._fs.write(descriptor, chunks)
            self._unsynced_paths.add(path)
            self._fsynced.discard(path)

    def write_durably(self, pending: Sequence[PendingBatch]) -> None:
        """Appends the batches to the end of their segment files and makes them durable,
        with every byte written before them: recovery removes the segments after a torn
        one, so an earlier file's unsynced tail (spilled, the write-ahead log holding it
        until the next checkpoint) would take these with it. Their index entries still
        wait for the next ``synced``."""
        self.write(pending)
        paths = self._unsynced_paths - self._fsynced
        for path in sorted(paths):
            with self._descriptors.using(path, writable=True) as descriptor:
                self._fs.fsync(descriptor)
        self._fsynced |= paths
        # A file created since its directory was last synced (by this write, or by a spill
        # whose checkpoint has not come yet) could vanish with a power cut, whatever its
        # own fsync: its directory entry must be durable too.
        if not paths <= self._listed_durably:
            self._fs.fsync_directory(self.directory)
            self._listed_durably |= paths

    def synced(self, paths: frozenset[str]) -> None:
        """The store made ``paths`` (taken from ``unsynced_paths`` before) durable: index
        the batches now durable, and seal the rolled segments now complete."""
        self._unsynced_paths -= paths
        self._listed_durably |= paths  # the store syncs their directory with them
        self._fsynced -= paths
        durable = [batch for batch in self._unindexed if batch[0].path in paths]
        self._unindexed = [batch for batch in self._unindexed if batch[0].path not in paths]
        self._write_index(durable)
        self._seal_ready_segments()

    def forget_segments(self, dropped: Sequence[Segment]) -> None:
        """Retention deletes ``dropped``: nothing of theirs is to be indexed or sealed."""
        paths = {segment.path for segment in dropped}
        self._unindexed = [batch for batch in self._unindexed if batch[0].path not in paths]
        self._unsynced_paths -= paths
        self._listed_durably -= paths
        self._fsynced -= paths
        with self._seal_lock:
            self._to_seal = [segment for segment in self._to_seal if segment.path not in paths]

    def _write_index(self, batches: Sequence[UnindexedBatch]) -> None:
        """Appends one index block per segment for the durable batches."""
        blocks: dict[str, tuple[Segment, list[IndexEntry], int]] = {}
        for segment, entry, end_position in batches:
            _, entries, _ = blocks.setdefault(segment.path, (segment, [], 0))
            entries.append(entry)
            blocks[segment.path] = (segment, entries, end_position)
        for segment, entries, end_position in blocks.values():
            with self._descriptors.using(index_path_for(segment.path), writable=True) as handle:
                self._fs.write(handle, [encode_block(entries, end_position)])
            segment.indexed_count += len(entries)

    def _seal_ready_segments(self) -> None:
        """Maps a sealed index for each rolled segment that is fully written, durable and
        indexed."""
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
        with self._descriptors.using(index_path, writable=False) as descriptor:
            data = self._fs.pread(descriptor, self._fs.size(index_path), 0)
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
        self._fs.fsync_directory(self.directory)
        index = decode_sealed_index(
            self._fs.map_file(sealed_path), segment.base_offset, verify=False
        )
        if index is None:
            return False
        index.adopt_into(segment)
        # Superseded; if the removal is lost in a crash, recovery ignores the index file.
        self._descriptors.forget([index_path])
        self._fs.remove(index_path)
        return True


def remove_segment_files(
    fs: FileSystem,
    descriptors: DescriptorCache,
    writer: SegmentWriter,
    directory: str,
    segments: Sequence[Segment],
) -> None:
    """Deletes segments nothing reads any more (dropped by retention, replaced by
    compaction) with their index and sealed-index files, then syncs the directory.
    Blocks: call from a worker thread."""
    writer.forget_segments(segments)
    paths = [
        path
        for segment in segments
        for path in (segment.path, index_path_for(segment.path), sealed_path_for(segment.path))
    ]
    descriptors.forget(paths)
    listed = set(fs.list_directory(directory))
    for path in paths:
        if os.path.basename(path) in listed:
            fs.remove(path)
    fs.fsync_directory(directory)

"""Reading ``T.delay`` into the delay schedule: each partition's position, topic ids, and
chunks of filed records committed with the position they move to."""

from __future__ import annotations

from collections.abc import Sequence

from kshim.storage.interface import TopicPartition
from kshim.storage.meta import lmdb_keys as keys
from kshim.storage.schedule.delay_appends import Appends
from kshim.storage.schedule.delay_environment import ScheduleEnvironment, guarded
from kshim.storage.schedule.delay_filing import FiledChunk, ScheduleChange, file_chunk
from kshim.storage.schedule.delay_records import SEQ, TOPIC_ID, StaleChunk


class ScheduleIntake(ScheduleEnvironment):
    """Records of ``T.delay`` filed into the schedule, with each partition's position."""

    @guarded
    def position(self, delay_partition: TopicPartition) -> int:
        """The next offset of the ``T.delay`` partition not yet read into the schedule."""
        if not self.exists:
            return 0
        with self._open().begin(db=self._positions) as txn:
            value = txn.get(keys.partition_key(delay_partition))
        return 0 if value is None else keys.decode_int64(value)

    @guarded
    def schedule(
        self,
        delay_partition: TopicPartition,
        target: TopicPartition,
        changes: Sequence[ScheduleChange],
        next_position: int,
        now_ms: int,
    ) -> None:
        """Applies ``changes`` of ``delay_partition`` (in offset order) to the schedule of
        ``target`` and moves the partition's position to ``next_position``, atomically;
        changes below the stored position were applied before (a replay after a crash)
        and are skipped."""
        chunk = file_chunk(changes, self.position(delay_partition), self._next_seq,
                           self.topic_id(target.topic), target.partition, now_ms,
                           self.near_buckets())  # fmt: skip
        self.commit_chunk(delay_partition, target, chunk, next_position)

    @guarded
    def topic_id(self, topic: str) -> int:
        """The number entries name ``topic`` by, given (durably) if it has none."""
        topic_id = self._topic_ids.get(topic)
        if topic_id is None:
            with self._open().begin(write=True) as txn:
                stored = txn.get(keys.DELAY_NEXT_TOPIC_ID_KEY, db=self._state)
                topic_id = 0 if stored is None else TOPIC_ID.unpack(stored)[0]
                txn.put(keys.DELAY_NEXT_TOPIC_ID_KEY, TOPIC_ID.pack(topic_id + 1), db=self._state)
                txn.put(keys.topic_key(topic), TOPIC_ID.pack(topic_id), db=self._topics)
            self._topic_ids[topic] = topic_id
            self._topic_names[topic_id] = topic
        return topic_id

    @property
    def next_seq(self) -> int:
        """The seq the next change read into the schedule takes."""
        return self._next_seq

    @guarded
    def commit_chunk(
        self,
        delay_partition: TopicPartition,
        target: TopicPartition,
        chunk: FiledChunk,
        next_position: int,
    ) -> None:
        """Appends ``chunk`` (delay_filing.file_chunk's, for ``target`` and made from this
        store's ``position``, ``next_seq``, ``topic_id`` and ``near_buckets``) to the
        bucket files and moves the partition's position to ``next_position``, atomically.
        Raises StaleChunk if the store has changed since those were read."""
        if (chunk.first_seq != self._next_seq
                or self._topic_names.get(chunk.topic_id) != target.topic
                or chunk.near != self.near_buckets()):  # fmt: skip
            raise StaleChunk(f"{delay_partition}: the schedule changed under a filed chunk")
        filed = Appends(self, chunk.buckets, chunk.loaded)
        try:
            with self._open().begin(write=True) as txn:
                position_key = keys.partition_key(delay_partition)
                stored = txn.get(position_key, db=self._positions)
                start = 0 if stored is None else keys.decode_int64(stored)
                if start != chunk.start:
                    raise StaleChunk(f"{delay_partition}: read from {chunk.start}, not {start}")
                for key, seq in chunk.cancels:
                    txn.put(
                        keys.delay_cancel_key(chunk.topic_id, key), SEQ.pack(seq), db=self._cancels
                    )
                filed.counts[target.topic] += chunk.filed
                self._next_seq = chunk.first_seq + chunk.seqs
                filed.commit(txn)
                if next_position > start:
                    txn.put(position_key, keys.encode_int64(next_position), db=self._positions)
        except BaseException:
            filed.rollback()
            raise
        filed.publish()

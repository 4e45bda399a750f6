"""What ``kshim delays`` and the metrics say of the delay schedule, per topic, and
forgetting a deleted topic's records."""

from __future__ import annotations

from collections.abc import Iterable

from kshim.storage.meta import lmdb_keys as keys
from kshim.storage.meta.lmdb_types import translate_lmdb_errors
from kshim.storage.schedule.delay_buckets import Bucket
from kshim.storage.schedule.delay_environment import ScheduleEnvironment, guarded
from kshim.storage.schedule.delay_filing import NO_MARK
from kshim.storage.schedule.delay_records import (
    LATENESS,
    LATENESS_BOUNDS_MS,
    TOPIC_ID,
    BucketState,
    TopicSummary,
    decode_bucket_state,
)


class ScheduleSummary(ScheduleEnvironment):
    """The schedule as tools and metrics see it, per topic."""

    @translate_lmdb_errors
    @guarded
    def summary(self) -> dict[str, TopicSummary]:
        """Pending records, the next due time and the lateness counts, per topic with any
        record pending or delivered. Raises LmdbFailed when the environment cannot be read
        (ScheduleLayoutError when it is an older kshim's)."""
        if not self.exists:
            return {}
        with self._open().begin() as txn:
            counts = {
                keys.split_topic(key): keys.decode_int64(value)
                for key, value in txn.cursor(db=self._counts)
            }
            lateness = {
                keys.split_topic(key): LATENESS.unpack(value)
                for key, value in txn.cursor(db=self._lateness)
            }
            names = {
                TOPIC_ID.unpack(value)[0]: bytes(key).decode("utf-8")
                for key, value in txn.cursor(db=self._topics)
            }
            buckets = [
                (Bucket(*keys.split_delay_bucket_key(key)), decode_bucket_state(bytes(value)))
                for key, value in txn.cursor(db=self._bucket_db)
            ]
        next_due = self._first_due(buckets, names)
        return {
            topic: TopicSummary(
                counts.get(topic, 0),
                next_due.get(topic),
                lateness.get(topic, (0,) * (len(LATENESS_BOUNDS_MS) + 1)),
            )
            for topic in sorted(counts.keys() | lateness.keys())
        }

    def _first_due(
        self, buckets: Iterable[tuple[Bucket, BucketState]], names: dict[int, str]
    ) -> dict[str, int]:
        """Per topic, the first due time in the buckets: from each bucket's index, but
        read from the file for a minute bucket delivery has begun on."""
        first: dict[str, int] = {}
        for bucket, state in buckets:
            if state.mark == NO_MARK:
                found = state.first_due
            else:
                found = {}
                for entry in self._entries_after(bucket, state, state.mark, missing_ok=True):
                    found[entry.topic_id] = min(found.get(entry.topic_id, entry.order_ms),
                                                entry.order_ms)  # fmt: skip
            for topic_id, due in found.items():
                name = names.get(topic_id)
                if name is not None and due < first.get(name, due + 1):
                    first[name] = due
        return first

    @guarded
    def forget_topic(self, topic: str, delay_topic: str) -> None:
        """Forgets ``topic``'s pending records (skipped wherever they are met: their
        topic id is gone) and the positions of ``delay_topic`` (the topic was deleted)."""
        if not self.exists:
            return
        with self._open().begin(write=True) as txn:
            topic_id = self._topic_ids.pop(topic, None)
            if topic_id is not None:
                del self._topic_names[topic_id]
            txn.delete(keys.topic_key(topic), db=self._topics)
            cursor = txn.cursor(db=self._positions)
            prefix = keys.topic_prefix(delay_topic)
            while cursor.set_range(prefix) and bytes(cursor.key()).startswith(prefix):
                cursor.delete()
            txn.delete(keys.topic_prefix(topic), db=self._counts)
            txn.delete(keys.topic_prefix(topic), db=self._lateness)

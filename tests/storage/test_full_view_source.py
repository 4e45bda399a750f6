"""The id of the topic a full-data view was built from (kshim gateway's views): kept beside
the view's start offset, and gone with the view when it is reset or its topic deleted."""

from __future__ import annotations

from pathlib import Path

from kshim.storage.interface import TopicPartition
from kshim.storage.views.full_view_store import FullViewStore

SOURCE = TopicPartition("orders", 1)
TOPIC_ID = bytes(range(16))


def test_the_source_id_is_kept_until_the_view_is_reset(tmp_path: Path) -> None:
    store = FullViewStore(str(tmp_path))
    try:
        assert store.source_id(SOURCE) is None
        store.reset_partition(SOURCE, 5)
        store.note_source_id(SOURCE, TOPIC_ID)
        assert store.source_id(SOURCE) == TOPIC_ID
        assert store.source_id(TopicPartition("orders", 0)) is None
        assert store.start_offset(SOURCE) == 5
        assert store.viewed_topics() == {"orders"}
        store.reset_partition(SOURCE, 7)
        assert store.source_id(SOURCE) is None
        store.note_source_id(SOURCE, TOPIC_ID)
        store.delete_topic("orders")
        assert store.source_id(SOURCE) is None
        assert store.viewed_topics() == set()
    finally:
        store.close()


def test_the_source_id_survives_reopening(tmp_path: Path) -> None:
    store = FullViewStore(str(tmp_path))
    store.reset_partition(SOURCE, 0)
    store.note_source_id(SOURCE, TOPIC_ID)
    store.close()
    reopened = FullViewStore(str(tmp_path))
    try:
        assert reopened.source_id(SOURCE) == TOPIC_ID
    finally:
        reopened.close()

"""The cyclic collector held off while a batch is read and applied (apply/collector.py)."""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Iterator

import pytest

from spark_examples.apply.collector import collection_paused
from spark_examples.apply.sink import SourceRecord, apply_batch, decode_kshim, ensure_state_table
from spark_examples.change_format import encode_key, encode_value
from spark_examples.databases import open_database

TIMEOUT_S = 20.0


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.enable()
    yield
    if not was_enabled:
        gc.disable()


def test_the_collector_is_off_inside_and_on_again_after() -> None:
    with collection_paused():
        assert not gc.isenabled()
        with collection_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause still holds
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    with collection_paused():
        pass
    assert not gc.isenabled()


def test_overlapping_pauses_on_two_threads_end_with_the_last() -> None:
    inside, release = threading.Event(), threading.Event()

    def writer() -> None:
        with collection_paused():
            inside.set()
            assert release.wait(TIMEOUT_S)

    thread = threading.Thread(target=writer)
    with collection_paused():
        thread.start()
        assert inside.wait(TIMEOUT_S)
    assert not gc.isenabled()  # the writer's pause outlives the reader's
    release.set()
    thread.join(TIMEOUT_S)
    assert gc.isenabled()


def test_an_error_inside_ends_the_pause() -> None:
    with pytest.raises(ValueError), collection_paused():
        raise ValueError("a batch failed")
    assert gc.isenabled()


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_a_cycle_made_during_a_pause_is_collected_after_it() -> None:
    with collection_paused():
        first, second = _Node(), _Node()
        first.other, second.other = second, first
        alive = weakref.ref(first)
        del first, second
        assert alive() is not None  # only the collector frees a cycle
    gc.collect()
    assert alive() is None


def test_apply_batch_leaves_the_collector_as_it_found_it(tmp_path: object) -> None:
    database = open_database(f"sqlite:///{tmp_path}/dest.db")
    try:
        ensure_state_table(database)
        value = encode_value(1, "insert", "t", {"id": "integer"}, {"id": 1})
        record = SourceRecord("topic", 0, 0, encode_key("t", {"id": 1}), value)
        assert apply_batch(database, [record]).applied == 1
        assert gc.isenabled()
        broken = SourceRecord("topic", 0, 1, b"not json", b"{}")
        with pytest.raises(Exception, match="cannot apply"):
            apply_batch(database, [broken], max_retries=0)
        assert gc.isenabled()
    finally:
        database.close()


def test_apply_batch_decodes_with_the_collector_off(tmp_path: object) -> None:
    seen: list[bool] = []

    def decode(record: SourceRecord, destination: object) -> object:
        seen.append(gc.isenabled())
        return decode_kshim(record, destination)  # type: ignore[arg-type]

    database = open_database(f"sqlite:///{tmp_path}/dest.db")
    try:
        ensure_state_table(database)
        value = encode_value(1, "insert", "t", {"id": "integer"}, {"id": 1})
        record = SourceRecord("topic", 0, 0, encode_key("t", {"id": 1}), value)
        apply_batch(database, [record], decoder=decode)  # type: ignore[arg-type]
    finally:
        database.close()
    assert seen == [False]
    assert gc.isenabled()

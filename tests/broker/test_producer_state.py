"""Idempotent producer checks (Kafka's ProducerStateManager rules)."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from kshim.broker.producer_state import (
    BATCHES_TO_RETAIN,
    SEQUENCE_WRAP,
    Duplicate,
    PartitionProducerState,
)
from kshim.protocol.record_batch import CONTROL_FLAG_MASK, BatchHeader

PRODUCER = 1000
INT32_MAX = 2**31 - 1


def header(
    sequence: int,
    count: int = 1,
    epoch: int = 0,
    producer_id: int = PRODUCER,
    base_offset: int = 0,
    attributes: int = 0,
) -> BatchHeader:
    return BatchHeader(
        base_offset=base_offset,
        length=100,
        partition_leader_epoch=0,
        magic=2,
        crc=0,
        attributes=attributes,
        last_offset_delta=count - 1,
        base_timestamp=0,
        max_timestamp=0,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        records_count=count,
    )


def append(state: PartitionProducerState, batch: BatchHeader, base_offset: int) -> None:
    """What the produce path does: check, then record the appended batch."""
    assert state.check(batch) is None
    state.record(batch, base_offset)


def with_batches(count: int, records_per_batch: int = 2) -> PartitionProducerState:
    """A state that accepted ``count`` batches at offsets 100, 102, ... sequences 0, 2, ..."""
    state = PartitionProducerState()
    for index in range(count):
        append(state, header(index * records_per_batch, records_per_batch), 100 + 2 * index)
    return state


def test_retains_five_batches() -> None:
    assert BATCHES_TO_RETAIN == 5
    assert SEQUENCE_WRAP == 2**31


def test_non_idempotent_batches_are_never_checked() -> None:
    state = PartitionProducerState()
    plain = header(-1, producer_id=-1)
    assert state.check(plain) is None
    state.record(plain, 0)
    assert state.producers == {}


def test_unknown_producer_accepts_any_sequence() -> None:
    state = PartitionProducerState()
    assert state.check(header(0)) is None
    assert state.check(header(12345, epoch=7)) is None
    append(state, header(500, count=3), 10)
    assert state.check(header(503)) is None
    assert state.check(header(500, producer_id=PRODUCER + 1)) is None  # another producer


def test_next_sequence_is_accepted_and_a_gap_refused() -> None:
    state = with_batches(2)  # sequences 0-1, 2-3
    assert state.check(header(4)) is None
    assert state.check(header(5)) == ErrorCode.out_of_order_sequence_number
    assert state.check(header(100)) == ErrorCode.out_of_order_sequence_number


@pytest.mark.parametrize("retained", range(5))
def test_duplicate_of_each_of_the_last_five_batches_returns_its_offset(retained: int) -> None:
    state = with_batches(8)  # batches 3..7 are the last five
    batch_index = 3 + retained
    retry = header(batch_index * 2, count=2)
    assert state.check(retry) == Duplicate(100 + 2 * batch_index)


def test_sixth_oldest_batch_is_forgotten() -> None:
    state = with_batches(6)  # batch 0 (sequences 0-1) has dropped out
    assert state.check(header(2, count=2)) == Duplicate(102)
    assert state.check(header(0, count=2)) == ErrorCode.out_of_order_sequence_number


def test_retry_with_a_different_batch_shape_is_out_of_order() -> None:
    state = with_batches(2)  # sequences 0-1, 2-3
    assert state.check(header(2, count=1)) == ErrorCode.out_of_order_sequence_number
    assert state.check(header(1, count=2)) == ErrorCode.out_of_order_sequence_number


def test_older_epoch_is_fenced() -> None:
    state = PartitionProducerState()
    append(state, header(0, epoch=3), 0)
    assert state.check(header(1, epoch=2)) == ErrorCode.invalid_producer_epoch
    assert state.check(header(0, epoch=0)) == ErrorCode.invalid_producer_epoch


def test_epoch_bump_requires_sequence_zero() -> None:
    state = with_batches(3)
    assert state.check(header(6, epoch=1)) == ErrorCode.out_of_order_sequence_number
    assert state.check(header(1, epoch=1)) == ErrorCode.out_of_order_sequence_number
    assert state.check(header(0, epoch=1)) is None


def test_epoch_bump_starts_a_fresh_history() -> None:
    state = with_batches(3)
    append(state, header(0, count=2, epoch=1), 200)
    assert state.producers[PRODUCER].epoch == 1
    assert state.check(header(0, count=2, epoch=1)) == Duplicate(200)
    assert state.check(header(2, epoch=1)) is None
    # The old epoch's batches are gone and the old epoch is now fenced.
    assert state.check(header(0, count=2, epoch=0)) == ErrorCode.invalid_producer_epoch


def test_sequence_wraps_to_zero_after_int32_max() -> None:
    state = PartitionProducerState()
    append(state, header(INT32_MAX - 1, count=2), 0)  # sequences MAX-1 and MAX
    assert state.check(header(INT32_MAX + 1)) == ErrorCode.out_of_order_sequence_number
    assert state.check(header(1)) == ErrorCode.out_of_order_sequence_number
    assert state.check(header(0)) is None
    append(state, header(0, count=3), 2)
    assert state.check(header(3)) is None
    assert state.check(header(0, count=3)) == Duplicate(2)


def test_batch_crossing_the_wrap_is_followed_by_the_wrapped_sequence() -> None:
    state = PartitionProducerState()
    append(state, header(INT32_MAX, count=3), 0)  # sequences MAX, 0, 1 (Kafka wraps)
    assert state.check(header(2)) is None
    assert state.check(header(INT32_MAX, count=3)) == Duplicate(0)


def test_producers_are_tracked_independently() -> None:
    state = PartitionProducerState()
    append(state, header(0, producer_id=1), 0)
    append(state, header(0, producer_id=2, epoch=4), 1)
    assert state.check(header(1, producer_id=1)) is None
    assert state.check(header(1, producer_id=2, epoch=4)) is None
    assert state.check(header(0, producer_id=1)) == Duplicate(0)
    assert state.check(header(0, producer_id=2, epoch=4)) == Duplicate(1)
    assert state.check(header(0, producer_id=2, epoch=3)) == ErrorCode.invalid_producer_epoch


def test_recover_rebuilds_the_state_from_log_headers() -> None:
    live = PartitionProducerState()
    recovered = PartitionProducerState()
    offset = 0
    stored: list[BatchHeader] = []
    for sequence in range(0, 14, 2):
        batch = header(sequence, count=2)
        append(live, batch, offset)
        stored.append(header(sequence, count=2, base_offset=offset))
        offset += 2
    for batch in stored:
        recovered.recover(batch)
    assert recovered.producers == live.producers
    assert recovered.check(header(14)) is None
    assert recovered.check(header(12, count=2)) == Duplicate(12)
    assert recovered.check(header(2, count=2)) == ErrorCode.out_of_order_sequence_number


def test_recover_skips_control_and_plain_batches() -> None:
    state = PartitionProducerState()
    state.recover(header(0, base_offset=0))
    state.recover(header(-1, producer_id=-1, base_offset=1))
    state.recover(header(-1, base_offset=2, attributes=CONTROL_FLAG_MASK))  # a commit marker
    assert state.check(header(1)) is None
    assert state.check(header(0)) == Duplicate(0)


def test_recover_follows_epoch_bumps() -> None:
    state = PartitionProducerState()
    state.recover(header(0, count=2, epoch=0, base_offset=0))
    state.recover(header(0, count=1, epoch=1, base_offset=2))
    assert state.producers[PRODUCER].epoch == 1
    assert state.check(header(1, epoch=1)) is None
    assert state.check(header(2, epoch=0)) == ErrorCode.invalid_producer_epoch

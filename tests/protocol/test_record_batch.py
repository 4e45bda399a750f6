"""Record batch v2 headers: golden bytes, validation, offset and timestamp patching."""

from __future__ import annotations

import struct

import crc32c
import pytest

from kshim.protocol import record_batch
from kshim.protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    BATCH_OVERHEAD,
    CONTROL_FLAG_MASK,
    CRC_OFFSET,
    MAGIC_OFFSET,
    PARTITION_LEADER_EPOCH_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    BatchHeader,
    InvalidBatch,
    crc_of,
    iter_batches,
    read_header,
    set_log_append_time,
    stamped,
    validate_produced,
)
from kshim.protocol.records import BatchSpec, Record, build_batch, decode_records

# Two records, written out field by field per DefaultRecord.java:
# length, attributes, timestampDelta, offsetDelta, key, value, headers (all varints zigzag).
RECORD_0 = bytes.fromhex(
    "10"  # length 8
    "00"  # attributes
    "00"  # timestampDelta 0
    "00"  # offsetDelta 0
    "02" "6b"  # key length 1, "k"
    "02" "76"  # value length 1, "v"
    "00"  # header count 0
)  # fmt: skip
RECORD_1 = bytes.fromhex(
    "18"  # length 12
    "00"  # attributes
    "0a"  # timestampDelta 5
    "02"  # offsetDelta 1
    "01"  # key null (-1)
    "04" "7676"  # value length 2, "vv"
    "02"  # header count 1
    "02" "68" "02" "78"  # header "h" = "x"
)  # fmt: skip
RECORDS = RECORD_0 + RECORD_1
# CRC-32C of bytes 21..end; the same value kafka-python's DefaultRecordBatchBuilder computes.
GOLDEN_CRC = 0x280AFFB7
GOLDEN_BATCH = (
    struct.pack(">q", 0)  # BaseOffset
    + struct.pack(">i", 49 + len(RECORDS))  # Length: bytes after this field
    + struct.pack(">i", -1)  # PartitionLeaderEpoch
    + struct.pack(">b", 2)  # Magic
    + struct.pack(">I", GOLDEN_CRC)  # CRC
    + struct.pack(">h", 0)  # Attributes
    + struct.pack(">i", 1)  # LastOffsetDelta
    + struct.pack(">q", 1000)  # BaseTimestamp
    + struct.pack(">q", 1005)  # MaxTimestamp
    + struct.pack(">q", -1)  # ProducerId
    + struct.pack(">h", -1)  # ProducerEpoch
    + struct.pack(">i", -1)  # BaseSequence
    + struct.pack(">i", 2)  # RecordsCount
    + RECORDS
)
GOLDEN_RECORDS = [
    Record(0, 1000, b"k", b"v"),
    Record(1, 1005, None, b"vv", (("h", b"x"),)),
]


def reseal(batch: bytearray) -> bytearray:
    """Recomputes the CRC after a test edits a covered field."""
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c.crc32c(bytes(batch[ATTRIBUTES_OFFSET:])))
    return batch


def edited(offset: int, fmt: str, value: int, batch: bytes = GOLDEN_BATCH) -> bytearray:
    changed = bytearray(batch)
    struct.pack_into(fmt, changed, offset, value)
    return changed


def test_offsets_follow_the_documented_layout() -> None:
    assert (
        record_batch.BASE_OFFSET_OFFSET,
        record_batch.LENGTH_OFFSET,
        record_batch.PARTITION_LEADER_EPOCH_OFFSET,
        record_batch.MAGIC_OFFSET,
        record_batch.CRC_OFFSET,
        record_batch.ATTRIBUTES_OFFSET,
        record_batch.LAST_OFFSET_DELTA_OFFSET,
        record_batch.BASE_TIMESTAMP_OFFSET,
        record_batch.MAX_TIMESTAMP_OFFSET,
        record_batch.PRODUCER_ID_OFFSET,
        record_batch.PRODUCER_EPOCH_OFFSET,
        record_batch.BASE_SEQUENCE_OFFSET,
        record_batch.RECORDS_COUNT_OFFSET,
        record_batch.RECORDS_OFFSET,
    ) == (0, 8, 12, 16, 17, 21, 23, 27, 35, 43, 51, 53, 57, 61)
    assert BATCH_OVERHEAD == record_batch.HEADER_STRUCT.size == 61
    assert record_batch.LOG_OVERHEAD == 12


def test_golden_crc_is_crc32c_of_the_covered_bytes() -> None:
    assert crc32c.crc32c(GOLDEN_BATCH[21:]) == GOLDEN_CRC
    assert crc_of(GOLDEN_BATCH) == GOLDEN_CRC


def test_build_batch_produces_the_golden_bytes() -> None:
    assert build_batch(GOLDEN_RECORDS) == GOLDEN_BATCH


def test_decode_records_reads_the_golden_bytes() -> None:
    header, records = decode_records(GOLDEN_BATCH)
    assert records == GOLDEN_RECORDS
    assert header.size == len(GOLDEN_BATCH)


def test_read_header_of_the_golden_batch() -> None:
    header = read_header(GOLDEN_BATCH)
    assert header == BatchHeader(
        base_offset=0,
        length=len(GOLDEN_BATCH) - 12,
        partition_leader_epoch=-1,
        magic=2,
        crc=GOLDEN_CRC,
        attributes=0,
        last_offset_delta=1,
        base_timestamp=1000,
        max_timestamp=1005,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        records_count=2,
    )
    assert header.size == len(GOLDEN_BATCH)
    assert (header.last_offset, header.next_offset) == (1, 2)
    assert header.compression_codec == 0
    assert not header.is_transactional
    assert not header.is_control
    assert not header.has_producer_id


def test_read_header_at_a_position() -> None:
    buffer = b"\xee" * 7 + GOLDEN_BATCH
    assert read_header(buffer, 7) == read_header(GOLDEN_BATCH)


def test_header_properties_from_attributes_and_producer_fields() -> None:
    attributes = 4 | TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK
    batch = edited(ATTRIBUTES_OFFSET, ">h", attributes)
    struct.pack_into(">qhi", batch, record_batch.PRODUCER_ID_OFFSET, 77, 3, 2**31 - 2)
    header = read_header(batch)
    assert header.compression_codec == 4
    assert header.is_transactional
    assert header.is_control
    assert header.has_producer_id
    assert header.last_sequence == 2**31 - 2 + 1


def test_validate_produced_accepts_the_golden_batch() -> None:
    assert validate_produced(GOLDEN_BATCH) == read_header(GOLDEN_BATCH)
    assert validate_produced(bytearray(GOLDEN_BATCH)) == read_header(GOLDEN_BATCH)
    assert validate_produced(memoryview(GOLDEN_BATCH)) == read_header(GOLDEN_BATCH)


def test_validate_produced_accepts_an_idempotent_batch() -> None:
    batch = build_batch(GOLDEN_RECORDS, BatchSpec(producer_id=5, producer_epoch=0, base_sequence=0))
    header = validate_produced(batch)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (5, 0, 0)


def assert_refused(batch: bytes | bytearray, corrupt: bool, match: str) -> None:
    with pytest.raises(InvalidBatch, match=match) as caught:
        validate_produced(batch)
    assert caught.value.corrupt is corrupt


def test_shorter_than_a_header_is_corrupt() -> None:
    assert_refused(GOLDEN_BATCH[:60], corrupt=True, match="61-byte header")
    assert_refused(b"", corrupt=True, match="61-byte header")


@pytest.mark.parametrize("magic", [0, 1, 3])
def test_wrong_magic_is_corrupt(magic: int) -> None:
    assert_refused(edited(MAGIC_OFFSET, ">b", magic), corrupt=True, match="magic")


def test_length_field_too_large_is_corrupt() -> None:
    batch = edited(record_batch.LENGTH_OFFSET, ">i", len(GOLDEN_BATCH) - 12 + 1)
    assert_refused(batch, corrupt=True, match="length")


def test_trailing_bytes_after_the_batch_are_corrupt() -> None:
    assert_refused(GOLDEN_BATCH + b"\x00", corrupt=True, match="length")


def test_truncated_records_are_corrupt() -> None:
    assert_refused(GOLDEN_BATCH[:-1], corrupt=True, match="length")


def test_crc_mismatch_is_corrupt() -> None:
    assert_refused(edited(CRC_OFFSET, ">I", GOLDEN_CRC ^ 1), corrupt=True, match="CRC")


@pytest.mark.parametrize("position", [ATTRIBUTES_OFFSET, 40, 60, len(GOLDEN_BATCH) - 1])
def test_flipped_covered_byte_is_a_crc_mismatch(position: int) -> None:
    batch = bytearray(GOLDEN_BATCH)
    batch[position] ^= 0x40
    assert_refused(batch, corrupt=True, match="CRC")


def test_records_count_zero_is_invalid_record() -> None:
    batch = reseal(edited(record_batch.RECORDS_COUNT_OFFSET, ">i", 0))
    assert_refused(batch, corrupt=False, match="offset range")


def test_records_count_disagreeing_with_last_offset_delta_is_invalid_record() -> None:
    batch = reseal(edited(record_batch.LAST_OFFSET_DELTA_OFFSET, ">i", 2))
    assert_refused(batch, corrupt=False, match="offset range")
    batch = reseal(edited(record_batch.RECORDS_COUNT_OFFSET, ">i", 1))
    assert_refused(batch, corrupt=False, match="offset range")


def test_control_batch_from_a_client_is_invalid_record() -> None:
    batch = reseal(edited(ATTRIBUTES_OFFSET, ">h", CONTROL_FLAG_MASK))
    assert_refused(batch, corrupt=False, match="control")


def test_producer_id_without_sequence_is_invalid_record() -> None:
    batch = build_batch(GOLDEN_RECORDS, BatchSpec(producer_id=9, producer_epoch=0))
    assert_refused(batch, corrupt=False, match="sequence")


def test_stamped_base_offset_leaves_the_crc_valid() -> None:
    epoch = read_header(GOLDEN_BATCH).partition_leader_epoch
    batch = stamped(GOLDEN_BATCH, 123_456_789_012, epoch)
    assert batch[:8] == struct.pack(">q", 123_456_789_012)
    assert batch[8:] == GOLDEN_BATCH[8:]
    header = validate_produced(batch)
    assert (header.base_offset, header.last_offset, header.crc) == (
        123_456_789_012,
        123_456_789_013,
        GOLDEN_CRC,
    )
    assert [record.offset for record in decode_records(bytes(batch))[1]] == [
        123_456_789_012,
        123_456_789_013,
    ]


def test_stamped_partition_leader_epoch_leaves_the_crc_valid() -> None:
    batch = stamped(GOLDEN_BATCH, read_header(GOLDEN_BATCH).base_offset, 7)
    assert batch[PARTITION_LEADER_EPOCH_OFFSET : PARTITION_LEADER_EPOCH_OFFSET + 4] == (
        b"\x00\x00\x00\x07"
    )
    assert validate_produced(batch).partition_leader_epoch == 7


def test_set_log_append_time_recomputes_the_crc() -> None:
    batch = bytearray(GOLDEN_BATCH)
    set_log_append_time(batch, 1_700_000_000_000)
    header = validate_produced(batch)  # would raise on a stale CRC
    assert header.crc != GOLDEN_CRC
    assert header.crc == crc32c.crc32c(bytes(batch[21:]))
    assert header.attributes & TIMESTAMP_TYPE_MASK
    assert header.max_timestamp == 1_700_000_000_000
    assert header.base_timestamp == 1000  # Kafka leaves BaseTimestamp alone
    # Every record now reports the append time.
    assert [record.timestamp for record in decode_records(bytes(batch))[1]] == [
        1_700_000_000_000,
        1_700_000_000_000,
    ]


def test_set_log_append_time_keeps_other_attribute_bits() -> None:
    batch = build_batch(GOLDEN_RECORDS, BatchSpec(attributes=1 | TRANSACTIONAL_FLAG_MASK))
    patched = bytearray(batch)
    set_log_append_time(patched, 5)
    header = read_header(patched)
    assert header.compression_codec == 1
    assert header.is_transactional
    assert header.crc == crc_of(patched)
    assert [record.value for record in decode_records(bytes(patched))[1]] == [b"v", b"vv"]


def test_iter_batches_yields_positions_and_stops_at_a_partial_batch() -> None:
    second = stamped(GOLDEN_BATCH, 2, read_header(GOLDEN_BATCH).partition_leader_epoch)
    buffer = GOLDEN_BATCH + second + GOLDEN_BATCH[:70]
    found = list(iter_batches(buffer))
    assert [(position, header.base_offset) for position, header in found] == [
        (0, 0),
        (len(GOLDEN_BATCH), 2),
    ]


def test_iter_batches_from_a_position_and_of_an_empty_buffer() -> None:
    buffer = b"\x00" * 3 + GOLDEN_BATCH
    assert [position for position, _ in iter_batches(buffer, 3)] == [3]
    assert list(iter_batches(b"")) == []
    assert list(iter_batches(GOLDEN_BATCH[:60])) == []


def test_iter_batches_stops_at_an_impossible_length() -> None:
    bogus = edited(record_batch.LENGTH_OFFSET, ">i", 10)  # shorter than the header itself
    assert list(iter_batches(GOLDEN_BATCH + bytes(bogus))) == [(0, read_header(GOLDEN_BATCH))]

"""Records inside v2 batches: build/decode round trips over every codec, snappy framings."""

from __future__ import annotations

import struct

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kshim.protocol import compression
from kshim.protocol.primitives import DecodeError
from kshim.protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    RECORDS_OFFSET,
    crc_of,
    read_header,
    stamped,
    validate_produced,
)
from kshim.protocol.records import BatchSpec, Record, build_batch, decode_records, iter_records

CODECS = [
    compression.NONE,
    compression.GZIP,
    compression.SNAPPY,
    compression.LZ4,
    compression.ZSTD,
]

nullable_bytes = st.none() | st.binary(max_size=300)
headers = st.lists(st.tuples(st.text(max_size=20), nullable_bytes), max_size=4).map(tuple)
record_contents = st.tuples(
    nullable_bytes, nullable_bytes, headers, st.integers(min_value=-(10**6), max_value=10**6)
)


def make_records(
    base_offset: int,
    base_timestamp: int,
    contents: list[tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]],
) -> list[Record]:
    return [
        Record(base_offset + index, base_timestamp + delta, key, value, record_headers)
        for index, (key, value, record_headers, delta) in enumerate(contents)
    ]


@pytest.mark.parametrize("codec", CODECS, ids=[compression.CODEC_NAMES[c] for c in CODECS])
@settings(max_examples=40, deadline=None)
@given(
    contents=st.lists(record_contents, min_size=1, max_size=12),
    base_offset=st.integers(min_value=0, max_value=2**40),
    base_timestamp=st.integers(min_value=0, max_value=2**42),
)
def test_build_then_decode_round_trips(
    codec: int,
    contents: list[tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]],
    base_offset: int,
    base_timestamp: int,
) -> None:
    records = make_records(base_offset, base_timestamp, contents)
    batch = build_batch(records, BatchSpec(base_offset=base_offset, attributes=codec))
    header = validate_produced(batch)  # a valid producer batch: CRC, counts, length
    assert header.compression_codec == codec
    assert header.records_count == len(records)
    assert header.base_offset == base_offset
    assert header.base_timestamp == records[0].timestamp
    assert header.max_timestamp == max(record.timestamp for record in records)
    decoded_header, decoded = decode_records(batch)
    assert decoded_header == header
    assert decoded == records


@pytest.mark.parametrize("codec", CODECS, ids=[compression.CODEC_NAMES[c] for c in CODECS])
def test_decode_from_a_memoryview_and_a_longer_buffer(codec: int) -> None:
    records = [Record(0, 10, b"key", b"value" * 50, (("a", None),)), Record(1, 9, None, None)]
    batch = build_batch(records, BatchSpec(attributes=codec))
    assert decode_records(memoryview(batch))[1] == records
    # Trailing bytes after the batch (the next batch in a segment) are not read.
    assert decode_records(batch + b"\xff" * 40)[1] == records


def test_records_offsets_stamped_after_build_follow_the_base_offset() -> None:
    batch = stamped(build_batch([Record(0, 1, b"a", b"b"), Record(1, 2, b"c", b"d")]), 500, 0)
    assert [record.offset for record in decode_records(bytes(batch))[1]] == [500, 501]


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(CODECS), st.lists(record_contents, min_size=1, max_size=4)),
        min_size=1,
        max_size=5,
    )
)
def test_iter_records_over_consecutive_batches(
    batches: list[
        tuple[
            int,
            list[tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]],
        ]
    ],
) -> None:
    stored = b""
    expected: list[Record] = []
    next_offset = 0
    for codec, contents in batches:
        records = make_records(next_offset, 1000, contents)
        stored += build_batch(records, BatchSpec(base_offset=next_offset, attributes=codec))
        expected += records
        next_offset += len(records)
    assert list(iter_records(stored)) == expected
    assert list(iter_records(memoryview(stored + stored[:30]))) == expected


def xerial_frame(data: bytes, chunk_size: int) -> bytes:
    """The xerial snappy stream, written by hand: magic, version 1, compatible version 1,
    then (int32 size, raw snappy block) per chunk (snappy-java's SnappyOutputStream)."""
    out = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for start in range(0, len(data), chunk_size):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + chunk_size]))
        out += struct.pack(">i", len(block)) + block
    return out


def with_compressed_body(uncompressed_batch: bytes, codec: int, body: bytes) -> bytes:
    """Replaces the records of a codec-0 batch with ``body``, fixing length, codec and CRC."""
    batch = bytearray(uncompressed_batch[:RECORDS_OFFSET] + body)
    struct.pack_into(">i", batch, LENGTH_OFFSET, len(batch) - LOG_OVERHEAD)
    struct.pack_into(">h", batch, ATTRIBUTES_OFFSET, codec)
    struct.pack_into(">I", batch, CRC_OFFSET, crc_of(batch))
    return bytes(batch)


@pytest.mark.parametrize("chunk_size", [1, 7, 64, 1 << 16])
def test_xerial_framed_snappy_is_decoded(chunk_size: int) -> None:
    records = [Record(offset, 1000 + offset, b"k%d" % offset, b"v" * offset) for offset in range(8)]
    plain = build_batch(records)
    raw_records = plain[RECORDS_OFFSET:]
    batch = with_compressed_body(plain, compression.SNAPPY, xerial_frame(raw_records, chunk_size))
    assert validate_produced(batch).compression_codec == compression.SNAPPY
    assert decode_records(batch)[1] == records


def test_xerial_stream_with_no_chunks_is_empty() -> None:
    assert compression.decompress(compression.SNAPPY, b"\x82SNAPPY\x00" + bytes(8)) == b""


def test_raw_snappy_is_what_the_broker_writes() -> None:
    data = b"hello hello hello hello"
    compressed = compression.compress(compression.SNAPPY, data)
    assert not compressed.startswith(compression.XERIAL_MAGIC)
    assert bytes(cramjam.snappy.decompress_raw(compressed)) == data


@pytest.mark.parametrize("codec", CODECS)
@given(data=st.binary(max_size=2000))
def test_compress_then_decompress(codec: int, data: bytes) -> None:
    assert compression.decompress(codec, compression.compress(codec, data)) == data


def test_lz4_uses_the_frame_format() -> None:
    # Kafka's LZ4 codec is the LZ4 frame format (magic 04 22 4D 18), not raw blocks.
    assert compression.compress(compression.LZ4, b"abc").startswith(b"\x04\x22\x4d\x18")


def test_gzip_output_is_a_gzip_stream() -> None:
    assert compression.compress(compression.GZIP, b"abc").startswith(b"\x1f\x8b")


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codec(codec: int) -> None:
    with pytest.raises(compression.UnsupportedCodec):
        compression.compress(codec, b"x")
    with pytest.raises(compression.UnsupportedCodec):
        compression.decompress(codec, b"x")
    batch = build_batch([Record(0, 0, None, b"x")])
    broken = with_compressed_body(batch, codec, batch[RECORDS_OFFSET:])
    with pytest.raises(DecodeError, match="decompress"):
        decode_records(broken)


@pytest.mark.parametrize("codec", CODECS[1:])
def test_garbage_compressed_body_is_a_decode_error(codec: int) -> None:
    batch = build_batch([Record(0, 0, None, b"x")])
    broken = with_compressed_body(batch, codec, b"\x00\x01garbage-bytes\xff" * 3)
    with pytest.raises(DecodeError):
        decode_records(broken)


def test_record_running_past_its_batch_is_a_decode_error() -> None:
    batch = build_batch([Record(0, 0, b"key", b"value")])
    # Claim a longer first record than the batch holds.
    body = bytearray(batch[RECORDS_OFFSET:])
    body[0] = 0x7E  # zigzag 63
    with pytest.raises(DecodeError):
        decode_records(with_compressed_body(batch, 0, bytes(body)))


def test_record_field_running_past_its_batch_is_a_decode_error() -> None:
    batch = build_batch([Record(0, 0, b"key", b"value")])
    header = read_header(batch)
    assert header.records_count == 1
    # Truncate the value bytes but keep the record length consistent with what remains.
    body = batch[RECORDS_OFFSET:-3]
    body = bytes([body[0] - 6]) + body[1:]
    with pytest.raises(DecodeError):
        decode_records(with_compressed_body(batch, 0, body))

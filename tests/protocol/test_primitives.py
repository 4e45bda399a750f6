"""Varints and tagged-field sections (https://kafka.apache.org/protocol#protocol_types)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kshim.protocol.primitives import (
    DecodeError,
    read_signed_varint,
    read_tagged_fields,
    read_unsigned_varint,
    write_signed_varint,
    write_unsigned_varint,
)

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
UINT64_MAX = (1 << 64) - 1


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (1, b"\x01"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (300, b"\xac\x02"),
        (16383, b"\xff\x7f"),
        (16384, b"\x80\x80\x01"),
        ((1 << 32) - 1, b"\xff\xff\xff\xff\x0f"),
        (UINT64_MAX, b"\xff" * 9 + b"\x01"),
    ],
)
def test_unsigned_varint_golden_bytes(value: int, encoded: bytes) -> None:
    assert write_unsigned_varint(value) == encoded
    assert read_unsigned_varint(encoded, 0) == (value, len(encoded))


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (-2, b"\x03"),
        (63, b"\x7e"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (-65, b"\x81\x01"),
        (INT64_MAX, b"\xfe" + b"\xff" * 8 + b"\x01"),
        (INT64_MIN, b"\xff" * 9 + b"\x01"),
    ],
)
def test_signed_varint_golden_bytes(value: int, encoded: bytes) -> None:
    assert write_signed_varint(value) == encoded
    assert read_signed_varint(encoded, 0) == (value, len(encoded))


@given(st.integers(min_value=0, max_value=UINT64_MAX), st.binary(max_size=4))
def test_unsigned_varint_round_trip(value: int, prefix: bytes) -> None:
    encoded = write_unsigned_varint(value)
    data = prefix + encoded + b"\xff"  # trailing byte must not be consumed
    assert read_unsigned_varint(data, len(prefix)) == (value, len(prefix) + len(encoded))


@given(st.integers(min_value=INT64_MIN, max_value=INT64_MAX), st.binary(max_size=4))
def test_signed_varint_round_trip(value: int, prefix: bytes) -> None:
    encoded = write_signed_varint(value)
    data = prefix + encoded + b"\x80"
    assert read_signed_varint(data, len(prefix)) == (value, len(prefix) + len(encoded))


@given(st.integers(min_value=0, max_value=UINT64_MAX))
def test_unsigned_varint_reads_from_memoryview_and_bytearray(value: int) -> None:
    encoded = write_unsigned_varint(value)
    assert read_unsigned_varint(memoryview(encoded), 0) == (value, len(encoded))
    assert read_unsigned_varint(bytearray(encoded), 0) == (value, len(encoded))


@pytest.mark.parametrize("data", [b"", b"\x80", b"\xff\xff", b"\x81\x80\x80"])
def test_truncated_varint_raises(data: bytes) -> None:
    with pytest.raises(DecodeError):
        read_unsigned_varint(data, 0)
    with pytest.raises(DecodeError):
        read_signed_varint(data, 0)


def test_varint_position_at_end_raises() -> None:
    with pytest.raises(DecodeError):
        read_unsigned_varint(b"\x01", 1)


def test_varint_longer_than_ten_bytes_raises() -> None:
    # Ten continuation bytes: no 64-bit value needs an eleventh byte.
    with pytest.raises(DecodeError, match="10 bytes"):
        read_unsigned_varint(b"\x80" * 10 + b"\x01", 0)


def test_ten_byte_varint_is_accepted() -> None:
    assert read_unsigned_varint(b"\x80" * 9 + b"\x01", 0) == (1 << 63, 10)


def test_decode_error_is_a_value_error() -> None:
    assert issubclass(DecodeError, ValueError)


def test_empty_tagged_field_section() -> None:
    assert read_tagged_fields(b"\x00", 0) == 1
    assert read_tagged_fields(b"\xaa\x00\xbb", 1) == 2


def test_tagged_fields_are_skipped() -> None:
    # Two fields: tag 0 with 3 bytes, tag 300 with 0 bytes; then one trailing byte.
    section = b"\x02" + b"\x00\x03abc" + b"\xac\x02\x00"
    assert read_tagged_fields(section + b"\x7f", 0) == len(section)


@given(
    st.lists(
        st.tuples(st.integers(min_value=0, max_value=1 << 20), st.binary(max_size=200)),
        max_size=5,
    )
)
def test_tagged_fields_skip_any_section(fields: list[tuple[int, bytes]]) -> None:
    section = write_unsigned_varint(len(fields)) + b"".join(
        write_unsigned_varint(tag) + write_unsigned_varint(len(value)) + value
        for tag, value in fields
    )
    assert read_tagged_fields(b"\x01" + section + b"tail", 1) == 1 + len(section)


@pytest.mark.parametrize(
    "section",
    [
        b"\x01\x00\x05abc",  # field value shorter than its size
        b"\x02\x00\x00",  # second field missing entirely
        b"\x01\x00",  # size varint missing
        b"\x01",  # tag varint missing
    ],
)
def test_truncated_tagged_fields_raise(section: bytes) -> None:
    with pytest.raises(DecodeError):
        read_tagged_fields(section, 0)

"""A record packed on its own (kshim.protocol.packed_record) comes back as it went in."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kshim.protocol.packed_record import MAX_HEADERS, pack_record, packed_key, unpack_record
from kshim.protocol.primitives import DecodeError
from kshim.protocol.records import Record

nullable = st.none() | st.binary(max_size=64)
headers = st.lists(st.tuples(st.text(max_size=12), nullable), max_size=5).map(tuple)


@given(st.integers(-1, 2**63 - 1), nullable, nullable, headers, st.integers(0, 2**40))
def test_pack_then_unpack_round_trips(
    timestamp: int,
    key: bytes | None,
    value: bytes | None,
    header_list: tuple[tuple[str, bytes | None], ...],
    offset: int,
) -> None:
    record = Record(offset, timestamp, key, value, header_list)
    packed = pack_record(record)
    assert unpack_record(packed, offset) == record
    assert packed_key(packed) == key


def test_a_packed_record_is_smaller_than_a_one_record_batch() -> None:
    packed = pack_record(Record(0, 1, b"key", b"v" * 100, (("trace", b"abc"),)))
    assert len(packed) == 10 + (4 + 3) + (4 + 100) + (2 + 5 + 4 + 3)  # 61 + 122 as a batch


@pytest.mark.parametrize("cut", [1, 9, 13, 20, 30])
def test_a_truncated_packed_record_is_a_decode_error(cut: int) -> None:
    packed = pack_record(Record(0, 1, b"key", b"value", (("trace", b"abc"),)))
    with pytest.raises(DecodeError):
        unpack_record(packed[: len(packed) - cut], 0)


def test_trailing_bytes_are_a_decode_error() -> None:
    with pytest.raises(DecodeError, match="after its last field"):
        unpack_record(pack_record(Record(0, 1, None, None)) + b"\x00", 0)


def test_more_headers_than_fit_are_refused() -> None:
    record = Record(0, 1, None, None, (("h", None),) * (MAX_HEADERS + 1))
    with pytest.raises(ValueError, match="at most"):
        pack_record(record)


def test_records_with_thousands_of_header_names_round_trip() -> None:
    # Packed header names are kept for reuse up to a bound; names past it are packed anew.
    records = [Record(0, 1, None, b"v", ((f"name-{index}", b"x"),)) for index in range(3000)]
    for record in records + records:
        assert unpack_record(pack_record(record), 0) == record

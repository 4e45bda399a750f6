"""Keyed records cut out of a batch: the same one-record batches a decode and rebuild
would give, byte for byte, for every codec; keyless records left out; bad bytes refused."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kshim.protocol import compression
from kshim.protocol.keyed_records import keyed_records
from kshim.protocol.primitives import DecodeError
from kshim.protocol.record_batch import RECORDS_OFFSET
from kshim.protocol.records import BatchSpec, build_batch, decode_records
from tests.protocol.test_records import CODECS, make_records, record_contents

Contents = list[tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]]


@pytest.mark.parametrize("codec", CODECS, ids=[compression.CODEC_NAMES[c] for c in CODECS])
@settings(max_examples=40, deadline=None)
@given(
    contents=st.lists(record_contents, min_size=1, max_size=12),
    base_offset=st.integers(min_value=0, max_value=2**40),
    base_timestamp=st.integers(min_value=0, max_value=2**42),
)
def test_one_record_batches_equal_a_rebuild_of_each_keyed_record(
    codec: int, contents: Contents, base_offset: int, base_timestamp: int
) -> None:
    records = make_records(base_offset, base_timestamp, contents)
    batch = build_batch(records, BatchSpec(base_offset=base_offset, attributes=codec))
    keyed = list(keyed_records(batch))
    expected = [record for record in records if record.key is not None]
    assert [(k.offset, k.timestamp, k.key, k.is_tombstone) for k in keyed] == [
        (r.offset, r.timestamp, r.key, r.value is None) for r in expected
    ]
    for cut, record in zip(keyed, expected, strict=True):
        one = cut.one_record_batch()
        assert one == build_batch([record], BatchSpec(base_offset=record.offset))
        assert decode_records(one)[1] == [record]


def test_a_record_longer_than_its_batch_is_a_decode_error() -> None:
    batch = bytearray(build_batch(make_records(0, 0, [(b"k", b"v", (), 0)])))
    batch[RECORDS_OFFSET] = 0x7E  # record length 63: past the end of the batch
    with pytest.raises(DecodeError):
        list(keyed_records(bytes(batch)))

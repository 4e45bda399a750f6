"""Size-prefixed frames (FrameDecoder, sans-io) and the request/response headers inside them."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kshim.protocol.framing import (
    FRAME_SIZE_LENGTH,
    MIN_REQUEST_SIZE,
    FrameDecoder,
    FrameError,
    frame,
)
from kshim.protocol.headers import (
    RequestHeader,
    encode_response_header,
    parse_request_header,
    peek_api,
)
from kshim.protocol.primitives import DecodeError

MAX_FRAME = 1 << 16


def size_prefixed(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def request_body(correlation_id: int, padding: int = 0) -> bytes:
    """A minimal request frame body: ApiVersions v0 header, client id "c", padding."""
    return struct.pack(">hhih", 18, 0, correlation_id, 1) + b"c" + b"\x00" * padding


def test_needs_data_until_the_whole_frame_arrived() -> None:
    body = request_body(7, padding=5)
    wire = size_prefixed(body)
    decoder = FrameDecoder(MAX_FRAME)
    for index in range(len(wire) - 1):
        decoder.feed(wire[index : index + 1])
        assert decoder.next_frame() is None
        assert decoder.buffered_bytes() == index + 1
    decoder.feed(wire[-1:])
    assert decoder.next_frame() == body
    assert decoder.buffered_bytes() == 0
    assert decoder.next_frame() is None


def test_pipelined_frames_come_out_in_order() -> None:
    bodies = [request_body(number, padding=number) for number in range(5)]
    decoder = FrameDecoder(MAX_FRAME)
    decoder.feed(b"".join(size_prefixed(body) for body in bodies))
    assert [decoder.next_frame() for _ in bodies] == bodies
    assert decoder.next_frame() is None
    assert decoder.buffered_bytes() == 0


def test_partial_second_frame_is_kept_across_feeds() -> None:
    first, second = request_body(1), request_body(2, padding=3)
    wire = size_prefixed(first) + size_prefixed(second)
    split = len(size_prefixed(first)) + 6
    decoder = FrameDecoder(MAX_FRAME)
    decoder.feed(wire[:split])
    assert decoder.next_frame() == first
    assert decoder.next_frame() is None
    assert decoder.buffered_bytes() == 6
    decoder.feed(wire[split:])
    assert decoder.next_frame() == second
    assert decoder.buffered_bytes() == 0


@given(
    st.lists(st.binary(min_size=MIN_REQUEST_SIZE, max_size=300), min_size=1, max_size=6),
    st.lists(st.integers(min_value=1, max_value=50), min_size=1, max_size=40),
)
def test_any_chunking_yields_the_same_frames(bodies: list[bytes], chunk_sizes: list[int]) -> None:
    wire = b"".join(size_prefixed(body) for body in bodies)
    decoder = FrameDecoder(MAX_FRAME)
    received: list[bytes] = []
    position = 0
    step = 0
    while position < len(wire):
        size = chunk_sizes[step % len(chunk_sizes)]
        decoder.feed(wire[position : position + size])
        position += size
        step += 1
        while (found := decoder.next_frame()) is not None:
            received.append(found)
    assert received == bodies
    assert decoder.buffered_bytes() == 0


def test_frame_of_exactly_the_maximum_size_is_accepted() -> None:
    body = b"\x01" * 100
    decoder = FrameDecoder(max_frame_size=100)
    decoder.feed(size_prefixed(body))
    assert decoder.next_frame() == body


def test_frame_above_the_maximum_size_is_refused_before_it_arrives() -> None:
    decoder = FrameDecoder(max_frame_size=100)
    decoder.feed(struct.pack(">i", 101))  # only the prefix: no need to buffer 101 bytes
    with pytest.raises(FrameError, match="101"):
        decoder.next_frame()


@pytest.mark.parametrize("size", [-1, 0, MIN_REQUEST_SIZE - 1, -(1 << 31)])
def test_frame_below_the_minimum_request_size_is_refused(size: int) -> None:
    decoder = FrameDecoder(MAX_FRAME)
    decoder.feed(struct.pack(">i", size) + b"\x00" * 16)
    with pytest.raises(FrameError):
        decoder.next_frame()


def test_frame_of_the_minimum_request_size_is_accepted() -> None:
    body = b"\x00" * MIN_REQUEST_SIZE
    decoder = FrameDecoder(MAX_FRAME)
    decoder.feed(size_prefixed(body))
    assert decoder.next_frame() == body


def test_frame_error_after_a_good_frame() -> None:
    good = request_body(1)
    decoder = FrameDecoder(MAX_FRAME)
    decoder.feed(size_prefixed(good) + struct.pack(">i", MAX_FRAME + 1))
    assert decoder.next_frame() == good
    with pytest.raises(FrameError):
        decoder.next_frame()


def test_frame_prefixes_the_total_size() -> None:
    parts: list[bytes | memoryview] = [b"abcde", memoryview(b"fghij"), b""]
    framed = frame(parts)
    assert framed[0] == b"\x00\x00\x00\x0a"
    assert framed[1:] == parts
    wire = b"".join(bytes(part) for part in framed)
    assert len(wire) == FRAME_SIZE_LENGTH + 10
    decoder = FrameDecoder(MAX_FRAME)
    decoder.feed(wire)
    assert decoder.next_frame() == b"abcdefghij"


# Headers (https://kafka.apache.org/protocol#protocol_messages).


def test_request_header_v1_golden_bytes() -> None:
    frame_body = (
        b"\x00\x03"  # api_key 3 (Metadata)
        b"\x00\x05"  # api_version 5
        b"\x00\x00\x01\x02"  # correlation_id 258
        b"\x00\x06client"  # client_id "client"
        b"BODY"
    )
    header, position = parse_request_header(frame_body, flexible=False)
    assert header == RequestHeader(3, 5, 258, "client")
    assert frame_body[position:] == b"BODY"
    assert peek_api(frame_body) == (3, 5, 258)


def test_request_header_v2_skips_tagged_fields() -> None:
    frame_body = (
        b"\x00\x03\x00\x0c\xff\xff\xff\xfe"  # Metadata v12, correlation_id -2
        b"\x00\x01x"  # client_id "x"
        b"\x01\x05\x02hi"  # one tagged field: tag 5, 2 bytes
        b"BODY"
    )
    header, position = parse_request_header(frame_body, flexible=True)
    assert header == RequestHeader(3, 12, -2, "x")
    assert frame_body[position:] == b"BODY"


def test_request_header_null_client_id() -> None:
    frame_body = b"\x00\x12\x00\x00\x00\x00\x00\x09\xff\xffBODY"
    header, position = parse_request_header(frame_body, flexible=False)
    assert header == RequestHeader(18, 0, 9, None)
    assert frame_body[position:] == b"BODY"


def test_request_header_invalid_utf8_client_id_is_replaced() -> None:
    frame_body = b"\x00\x12\x00\x00\x00\x00\x00\x09\x00\x02\xff\xfe"
    header, _ = parse_request_header(frame_body, flexible=False)
    assert header.client_id == "\ufffd\ufffd"


@pytest.mark.parametrize(
    ("frame_body", "flexible"),
    [
        (b"\x00\x03\x00\x05\x00\x00", False),  # shorter than the fixed part
        (b"\x00\x03\x00\x05\x00\x00\x00\x01\x00\x09abc", False),  # client id runs past the end
        (b"\x00\x03\x00\x0c\x00\x00\x00\x01\x00\x00", True),  # tagged-field count missing
        (b"\x00\x03\x00\x0c\x00\x00\x00\x01\x00\x00\x01\x00\x09ab", True),  # tagged field short
    ],
)
def test_truncated_request_header_raises(frame_body: bytes, flexible: bool) -> None:
    with pytest.raises(DecodeError):
        parse_request_header(frame_body, flexible)


def test_response_headers() -> None:
    assert encode_response_header(0x01020304, flexible=False) == b"\x01\x02\x03\x04"
    assert encode_response_header(-1, flexible=True) == b"\xff\xff\xff\xff\x00"

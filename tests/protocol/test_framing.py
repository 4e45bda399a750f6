"""Size-prefixed frames (FrameReceiver, sans-io) and the request/response headers inside them."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kshim.protocol import framing
from kshim.protocol.framing import (
    FRAME_SIZE_LENGTH,
    MIN_REQUEST_SIZE,
    FrameError,
    FrameReceiver,
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


def receive(receiver: FrameReceiver, data: bytes, chunk: int = 1 << 30) -> list[bytes]:
    """Writes ``data`` into the receiver's buffers as a socket would (at most ``chunk``
    bytes per read); returns the frames completed, as bytes."""
    frames: list[bytes] = []
    while data:
        buffer = receiver.buffer()
        assert len(buffer) > 0
        count = min(len(buffer), len(data), chunk)
        buffer[:count] = data[:count]
        data = data[count:]
        frames += [bytes(found) for found in receiver.received(count)]
    return frames


def test_needs_data_until_the_whole_frame_arrived() -> None:
    body = request_body(7, padding=5)
    wire = size_prefixed(body)
    receiver = FrameReceiver(MAX_FRAME)
    for index in range(len(wire) - 1):
        assert receive(receiver, wire[index : index + 1]) == []
    assert receive(receiver, wire[-1:]) == [body]


def test_pipelined_frames_come_out_in_order() -> None:
    bodies = [request_body(number, padding=number) for number in range(5)]
    receiver = FrameReceiver(MAX_FRAME)
    assert receive(receiver, b"".join(size_prefixed(body) for body in bodies)) == bodies


def test_partial_second_frame_is_kept_across_reads() -> None:
    first, second = request_body(1), request_body(2, padding=3)
    wire = size_prefixed(first) + size_prefixed(second)
    split = len(size_prefixed(first)) + 6
    receiver = FrameReceiver(MAX_FRAME)
    assert receive(receiver, wire[:split]) == [first]
    assert receive(receiver, wire[split:]) == [second]


@given(
    st.lists(st.binary(min_size=MIN_REQUEST_SIZE, max_size=300), min_size=1, max_size=6),
    st.lists(st.integers(min_value=1, max_value=50), min_size=1, max_size=40),
    st.sampled_from([16, 64, 1 << 16]),
)
def test_any_chunking_yields_the_same_frames(
    bodies: list[bytes], chunk_sizes: list[int], staging_bytes: int
) -> None:
    wire = b"".join(size_prefixed(body) for body in bodies)
    receiver = FrameReceiver(MAX_FRAME, staging_bytes)
    received: list[bytes] = []
    position = 0
    step = 0
    while position < len(wire):
        size = chunk_sizes[step % len(chunk_sizes)]
        received += receive(receiver, wire[position : position + size], chunk=size)
        position += size
        step += 1
    assert received == bodies


def test_large_frames_are_read_into_their_own_buffer() -> None:
    big = bytes(range(256)) * 40  # 10 KiB against a 1 KiB staging buffer
    wire = size_prefixed(request_body(1)) + size_prefixed(big) + size_prefixed(request_body(2))
    receiver = FrameReceiver(MAX_FRAME, staging_bytes=1024)
    frames = receive(receiver, wire, chunk=700)
    assert frames == [request_body(1), big, request_body(2)]
    receiver = FrameReceiver(MAX_FRAME, staging_bytes=1024)
    receive(receiver, wire[: len(size_prefixed(request_body(1))) + 100])
    # The rest of the large frame goes straight into a buffer of exactly its size.
    assert len(receiver.buffer()) == len(big) - (100 - FRAME_SIZE_LENGTH)


def test_frame_of_exactly_the_maximum_size_is_accepted() -> None:
    body = b"\x01" * 100
    receiver = FrameReceiver(max_frame_size=100)
    assert receive(receiver, size_prefixed(body)) == [body]


def test_frame_above_the_maximum_size_is_refused_before_it_arrives() -> None:
    receiver = FrameReceiver(max_frame_size=100)
    assert receive(receiver, struct.pack(">i", 101)) == []  # only the prefix: nothing buffered
    assert receiver.error is not None and "101" in str(receiver.error)


@pytest.mark.parametrize("size", [-1, 0, MIN_REQUEST_SIZE - 1, -(1 << 31)])
def test_frame_below_the_minimum_request_size_is_refused(size: int) -> None:
    receiver = FrameReceiver(MAX_FRAME)
    assert receive(receiver, struct.pack(">i", size) + b"\x00" * 16) == []
    assert isinstance(receiver.error, FrameError)


def test_frame_of_the_minimum_request_size_is_accepted() -> None:
    body = b"\x00" * MIN_REQUEST_SIZE
    receiver = FrameReceiver(MAX_FRAME)
    assert receive(receiver, size_prefixed(body)) == [body]
    assert receiver.error is None


def test_frame_error_after_a_good_frame() -> None:
    good = request_body(1)
    receiver = FrameReceiver(MAX_FRAME)
    assert receive(receiver, size_prefixed(good) + struct.pack(">i", MAX_FRAME + 1)) == [good]
    assert isinstance(receiver.error, FrameError)


def test_frame_prefixes_the_total_size() -> None:
    parts: list[bytes | memoryview] = [b"abcde", memoryview(b"fghij"), b""]
    framed = frame(parts)
    assert framed[0] == b"\x00\x00\x00\x0a"
    assert framed[1:] == parts
    wire = b"".join(bytes(part) for part in framed)
    assert len(wire) == FRAME_SIZE_LENGTH + 10
    assert receive(FrameReceiver(MAX_FRAME), wire) == [b"abcdefghij"]


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


def test_a_size_prefix_alone_commits_at_most_one_part(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(framing, "PART_BYTES", 1000)
    body = bytes(range(256)) * 20  # 5,120 bytes: six parts of at most 1,000
    receiver = FrameReceiver(MAX_FRAME, staging_bytes=64)
    assert receive(receiver, size_prefixed(body)[:40], chunk=13) == []
    assert len(receiver.buffer()) <= 1000
    assert receive(receiver, size_prefixed(body)[40:], chunk=333) == [body]
    huge = FrameReceiver(1 << 30, staging_bytes=64)
    assert receive(huge, struct.pack(">i", 1 << 29) + b"\x00" * 10) == []
    assert len(huge.buffer()) <= 1000  # not half a gigabyte on the prefix's word

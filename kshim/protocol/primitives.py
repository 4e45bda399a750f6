"""Primitive wire types shared by the hand-written codecs (varints, tagged fields).

The control plane uses kio's generated codecs; these helpers serve the parts
kshim parses itself: request headers and record batches
(https://kafka.apache.org/protocol#protocol_types).
"""

from __future__ import annotations


class DecodeError(ValueError):
    """Bytes that do not form a valid value of the expected type."""


def read_unsigned_varint(data: bytes | bytearray | memoryview, position: int) -> tuple[int, int]:
    """Returns (value, next position) of an unsigned LEB128 varint."""
    result = 0
    shift = 0
    while True:
        if position >= len(data):
            raise DecodeError("varint runs past the end of the buffer")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, position
        shift += 7
        if shift > 63:
            raise DecodeError("varint longer than 10 bytes")


def read_signed_varint(data: bytes | bytearray | memoryview, position: int) -> tuple[int, int]:
    """Returns (value, next position) of a zigzag-encoded varint."""
    raw, position = read_unsigned_varint(data, position)
    return (raw >> 1) ^ -(raw & 1), position


# Nearly every varint written is a small length or count: one byte, made once.
_ONE_BYTE_VARINTS = tuple(bytes((value,)) for value in range(0x80))


def write_unsigned_varint(value: int) -> bytes:
    """Returns the unsigned LEB128 encoding of a non-negative value."""
    if 0 <= value < 0x80:
        return _ONE_BYTE_VARINTS[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def write_signed_varint(value: int) -> bytes:
    """Returns the zigzag varint encoding of a 64-bit signed value."""
    return write_unsigned_varint((value << 1) ^ (value >> 63))


def write_array_length(count: int, flexible: bool) -> bytes:
    """An array's length prefix: compact (count + 1, varint) in flexible versions, else int32."""
    return write_unsigned_varint(count + 1) if flexible else count.to_bytes(4, "big", signed=True)


def write_string(value: str | None, flexible: bool) -> bytes:
    """A (nullable) string: compact (length + 1, varint; 0 = null) in flexible versions,
    else an int16 length (-1 = null)."""
    if value is None:
        return b"\x00" if flexible else b"\xff\xff"
    encoded = value.encode("utf-8")
    if flexible:
        return write_unsigned_varint(len(encoded) + 1) + encoded
    return len(encoded).to_bytes(2, "big") + encoded


def read_tagged_fields(data: bytes | bytearray | memoryview, position: int) -> int:
    """Skips a tagged-field section and returns the position after it."""
    count, position = read_unsigned_varint(data, position)
    for _ in range(count):
        _, position = read_unsigned_varint(data, position)
        size, position = read_unsigned_varint(data, position)
        position += size
        if position > len(data):
            raise DecodeError("tagged field runs past the end of the buffer")
    return position

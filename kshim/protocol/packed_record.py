"""One record packed on its own, outside any batch: what a store keeps of a record it
holds for later (the delay schedule keeps every pending record this way).

A one-record v2 batch would do, at 61 bytes of batch header per record and a CRC to
compute; this is 18 bytes plus 6 per header: the timestamp, the header count, the key
and value as int32-length-prefixed bytes (-1 for null), then per header its UTF-8 name
(uint16 length) and its nullable value (int32 length). Pure functions.
"""

from __future__ import annotations

import struct

from kshim.protocol.primitives import DecodeError
from kshim.protocol.records import Header, Record, RecordView

_FIXED = struct.Struct(">qH")  # timestamp, header count
_FIXED_KEY = struct.Struct(">qHi")  # the same, then the key length
_LENGTH = struct.Struct(">i")
_NAME_LENGTH = struct.Struct(">H")
_NULL = _LENGTH.pack(-1)
# For writers that lay out many packed records in one pass (kshim/storage/schedule/delay_filing.py):
# a record starts with RECORD_HEAD (timestamp, header count, key length), then the key,
# then LENGTH (the value's, -1 for none) and the value, then per header its
# ``header_prefix`` and value.
RECORD_HEAD = _FIXED_KEY
LENGTH = _LENGTH
MAX_HEADERS = 0xFFFF
_MAX_PACKED_NAMES = 1024
_packed_names: dict[str, bytes] = {}


def pack_record(record: RecordView) -> bytes:
    """``record`` without its offset (the store keeps that). Raises ValueError for more
    than MAX_HEADERS headers."""
    headers = record.headers
    if len(headers) > MAX_HEADERS:
        raise ValueError(f"a packed record holds at most {MAX_HEADERS} headers")
    key, value = record.key, record.value
    # Built in as few calls as it takes: the delay schedule packs every record it holds.
    parts = [_FIXED_KEY.pack(record.timestamp, len(headers), -1 if key is None else len(key)),
             key or b"", _NULL if value is None else _LENGTH.pack(len(value)),
             value or b""]  # fmt: skip
    for name, header_value in headers:
        packed_name = _packed_names.get(name)
        if packed_name is None:
            packed_name = _pack_name(name)
        if header_value is None:
            parts += (packed_name, _NULL)
        else:
            parts += (packed_name, _LENGTH.pack(len(header_value)), header_value)
    return b"".join(parts)


def _pack_name(name: str) -> bytes:
    """A header name as packed; the few names a topic's records use are kept packed."""
    encoded = name.encode()
    packed = _NAME_LENGTH.pack(len(encoded)) + encoded
    if len(_packed_names) < _MAX_PACKED_NAMES:
        _packed_names[name] = packed
    return packed


def header_prefix(name: str, value_length: int) -> bytes:
    """What precedes a header's value of ``value_length`` bytes in a packed record."""
    return _pack_name(name) + _LENGTH.pack(value_length)


def unpack_record(packed: bytes, offset: int) -> Record:
    """Inverse of ``pack_record``, the record placed at ``offset``. Raises DecodeError."""
    try:
        timestamp, header_count = _FIXED.unpack_from(packed, 0)
        key, position = _read_nullable(packed, _FIXED.size)
        value, position = _read_nullable(packed, position)
        headers: list[Header] = []
        for _ in range(header_count):
            (name_length,) = _NAME_LENGTH.unpack_from(packed, position)
            position += _NAME_LENGTH.size
            name = packed[position : position + name_length].decode()
            header_value, position = _read_nullable(packed, position + name_length)
            headers.append((name, header_value))
    except (struct.error, UnicodeDecodeError) as error:
        raise DecodeError(f"packed record unreadable: {error}") from error
    if position != len(packed):
        raise DecodeError("packed record has bytes after its last field")
    return Record(offset, timestamp, key, value, tuple(headers))


def packed_key(packed: bytes) -> bytes | None:
    """The record key of a packed record, without unpacking the rest."""
    return _read_nullable(packed, _FIXED.size)[0]


def _read_nullable(packed: bytes, position: int) -> tuple[bytes | None, int]:
    (length,) = _LENGTH.unpack_from(packed, position)
    position += _LENGTH.size
    if length < 0:
        return None, position
    if position + length > len(packed):
        raise DecodeError("packed record field runs past its end")
    return bytes(packed[position : position + length]), position + length

"""Record batch compression codecs (attributes bits 0-2).

Batches pass through the broker compressed; only components that need
individual records (timestamp lookup, the full-data view, tests) decompress.
cramjam covers snappy, lz4 and zstd with one native dependency; gzip is stdlib.
Snappy comes in two framings: raw blocks (librdkafka) and the xerial stream
(Java, kafka-python, aiokafka), told apart by its magic.
"""

from __future__ import annotations

import functools
import gzip
import importlib
import struct
from types import ModuleType

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER_SIZE = len(XERIAL_MAGIC) + 8  # magic, int32 version, int32 compatible version
_CHUNK_SIZE = struct.Struct(">i")


class UnsupportedCodec(ValueError):
    """Attributes name a codec outside 0-4."""


@functools.cache
def _cramjam() -> ModuleType:
    # Loaded on first use: a broker whose records are never decoded (no timestamp lookups,
    # no full-data view read) never needs it, and it costs 1.75 MB of RSS.
    return importlib.import_module("cramjam")


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    """Returns the uncompressed record bytes; raises UnsupportedCodec or ValueError."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return gzip.decompress(data)
    if codec == SNAPPY:
        return _snappy_decompress(bytes(data))
    if codec == LZ4:
        return bytes(_cramjam().lz4.decompress(data))
    if codec == ZSTD:
        return bytes(_cramjam().zstd.decompress(data))
    raise UnsupportedCodec(f"unknown compression codec {codec}")


def compress(codec: int, data: bytes) -> bytes:
    """Returns ``data`` compressed with the codec, in the framing Java clients use."""
    if codec == NONE:
        return data
    if codec == GZIP:
        return gzip.compress(data)
    if codec == SNAPPY:
        return bytes(_cramjam().snappy.compress_raw(data))
    if codec == LZ4:
        return bytes(_cramjam().lz4.compress(data))
    if codec == ZSTD:
        return bytes(_cramjam().zstd.compress(data))
    raise UnsupportedCodec(f"unknown compression codec {codec}")


def _snappy_decompress(data: bytes) -> bytes:
    if not data.startswith(XERIAL_MAGIC):
        return bytes(_cramjam().snappy.decompress_raw(data))
    out = bytearray()
    position = XERIAL_HEADER_SIZE
    while position < len(data):
        (size,) = _CHUNK_SIZE.unpack_from(data, position)
        position += _CHUNK_SIZE.size
        out += _cramjam().snappy.decompress_raw(data[position : position + size])
        position += size
    return bytes(out)

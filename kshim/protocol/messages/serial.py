"""Request bodies in as typed messages, typed responses out as bytes, any served version.

kio decodes and encodes each version (``protocol/codec.py``); ``convert.py``
moves the fields between its per-version classes and the typed ones.
"""

from __future__ import annotations

from typing import TypeVar

from kshim.protocol import codec
from kshim.protocol.messages.convert import to_kio, to_typed

RequestT = TypeVar("RequestT")


def decode_request(
    request_type: type[RequestT], api_key: int, version: int, frame: bytes | bytearray, offset: int
) -> RequestT:
    """The typed request of a body starting at ``offset``.

    Raises DecodeError when the bytes do not match the version's schema.
    """
    return to_typed(request_type, codec.decode_request(api_key, version, frame, offset))


def encode_response(api_key: int, version: int, message: object) -> bytes:
    """The body of a typed response in ``version``'s format."""
    response_class = codec.response_class(api_key, version)
    return codec.encode_entity(response_class, to_kio(response_class, message))

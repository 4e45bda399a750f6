"""A response body as a tree that keeps every byte: fields, arrays and tagged fields.

kio decodes a response into its dataclass, which is enough to compare values but loses
what a byte-level comparison of two brokers needs: a tagged field sent with its default
value reads the same as one left out, and a tag kio does not know is skipped. This walker
follows kio's schema of the response version (the same classes, field order and types;
kio's own readers for every primitive) and keeps, for each part, the bytes it came from:

    Struct   fields in wire order, then its tagged fields (KIP-482) in wire order, each
             with the tag number, its name (None for a tag the schema lacks) and value
    Array    the length prefix's bytes and the items (None for a null array)
    Leaf     a primitive (or an array of primitives): kio's value and its bytes

Joining every part's bytes in order gives back the body exactly (``joined``), so two trees
compare equal exactly when the bodies are equal byte for byte; with some leaves replaced by
placeholders (compat_tests/conformance_diff.py), the bodies compared are the normalised
ones. Layouts: https://kafka.apache.org/protocol#protocol_types and #protocol_messages.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kio._kio_native import (
    get_field_reader,
    read_compact_array_length,
    read_int8,
    read_legacy_array_length,
    read_unsigned_varint,
)
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)


class WalkError(ValueError):
    """A body that does not follow the schema: it ends early or a tagged field's size lies."""


@dataclass(frozen=True, slots=True)
class Leaf:
    value: Any
    raw: bytes


@dataclass(frozen=True, slots=True)
class Array:
    header: bytes  # the length prefix: int32 (-1 for null), or unsigned varint N+1 (0: null)
    items: tuple[Node, ...] | None


@dataclass(frozen=True, slots=True)
class Tagged:
    tag: int
    name: str | None  # None: a tag kio's schema of this version does not have
    header: bytes  # the tag and the size, two unsigned varints
    node: Node  # a Leaf holding the bytes when the tag is unknown


@dataclass(frozen=True, slots=True)
class Struct:
    type_name: str
    fields: tuple[tuple[str, Node], ...]
    tag_count: bytes  # the tagged-field count's varint; b"" in a non-flexible version
    tagged: tuple[Tagged, ...]
    null_marker: bytes = b""  # the int8 before a nullable struct (KIP-893)

    def field(self, name: str) -> Node | None:
        """The regular or tagged field ``name``, None when absent."""
        for field_name, node in self.fields:
            if field_name == name:
                return node
        for tagged in self.tagged:
            if tagged.name == name:
                return tagged.node
        return None


Node = Leaf | Array | Struct


def walk_body(response_class: type[Any], body: bytes) -> Struct:
    """The tree of a whole response body; raises WalkError when bytes are left over or
    missing."""
    tree, end = walk_struct(response_class, body, 0)
    if end != len(body):
        raise WalkError(f"{len(body) - end} bytes left over after {response_class.__name__}")
    return tree


def walk_struct(cls: type[Any], buffer: bytes, offset: int) -> tuple[Struct, int]:
    """The struct of class ``cls`` at ``offset``, and the offset after it."""
    regular, tagged_fields = [], {}
    for field in dataclasses.fields(cls):
        tag = get_field_tag(field)
        if tag is None:
            node, offset = walk_field(cls, field, buffer, offset, tagged=False)
            regular.append((field.name, node))
        else:
            tagged_fields[int(tag)] = field
    if not cls.__flexible__:
        return Struct(cls.__name__, tuple(regular), b"", ()), offset
    count_start = offset
    count, offset = _varint(buffer, offset)
    tag_count = buffer[count_start:offset]
    tagged = []
    for _ in range(count):
        entry, offset = walk_tagged(cls, tagged_fields, buffer, offset)
        tagged.append(entry)
    return Struct(cls.__name__, tuple(regular), tag_count, tuple(tagged)), offset


def walk_tagged(
    cls: type[Any], known: dict[int, dataclasses.Field[Any]], buffer: bytes, offset: int
) -> tuple[Tagged, int]:
    start = offset
    tag, offset = _varint(buffer, offset)
    size, offset = _varint(buffer, offset)
    header, end = buffer[start:offset], offset + size
    if end > len(buffer):
        raise WalkError(f"tagged field {tag} of {cls.__name__} claims {size} bytes past the end")
    field = known.get(tag)
    if field is None:
        return Tagged(tag, None, header, Leaf(buffer[offset:end], buffer[offset:end])), end
    node, after = walk_field(cls, field, buffer[:end], offset, tagged=True)
    if after != end:
        raise WalkError(
            f"tagged field {field.name} of {cls.__name__}: {size} bytes, read {after - offset}"
        )
    return Tagged(tag, field.name, header, node), end


def walk_field(
    cls: type[Any], field: dataclasses.Field[Any], buffer: bytes, offset: int, *, tagged: bool
) -> tuple[Node, int]:
    kind = classify_field(field)
    if isinstance(kind, EntityTupleField):
        return walk_array(cls, kind.type_, buffer, offset)
    if isinstance(kind, EntityField):
        if is_optional(field) and not tagged:
            (marker, after) = _checked(read_int8, buffer, offset)
            if marker < 0:
                return Leaf(None, buffer[offset:after]), after
            struct, end = walk_struct(kind.type_, buffer, after)
            return dataclasses.replace(struct, null_marker=buffer[offset:after]), end
        return walk_struct(kind.type_, buffer, offset)
    reader = get_field_reader(cls, field, False, tagged)
    value, after = _checked(reader, buffer, offset)
    return Leaf(value, buffer[offset:after]), after


def walk_array(
    cls: type[Any], item_class: type[Any], buffer: bytes, offset: int
) -> tuple[Array, int]:
    if cls.__flexible__:
        length, after = _checked(read_compact_array_length, buffer, offset)
    else:
        length, after = _checked(read_legacy_array_length, buffer, offset)
    header = buffer[offset:after]
    if length is None or length < 0:  # kio reads a null compact array as None
        return Array(header, None), after
    items = []
    for _ in range(length):
        item, after = walk_struct(item_class, buffer, after)
        items.append(item)
    return Array(header, tuple(items)), after


def _varint(buffer: bytes, offset: int) -> tuple[int, int]:
    value, after = _checked(read_unsigned_varint, buffer, offset)
    return int(value), after


def _checked(reader: Any, buffer: bytes, offset: int) -> tuple[Any, int]:
    """kio's reader at ``offset``: (value, the offset after it); WalkError past the end."""
    if offset > len(buffer):
        raise WalkError(f"read at {offset} past the end ({len(buffer)} bytes)")
    try:
        value, size = reader(buffer, offset)
    except Exception as error:  # kio's native readers raise several kinds
        raise WalkError(f"at byte {offset}: {error}") from error
    if offset + size > len(buffer):
        raise WalkError(f"a value at byte {offset} runs past the end ({len(buffer)} bytes)")
    return value, offset + size


def parts(node: Node) -> Iterator[bytes]:
    """Every byte string of ``node``, in wire order."""
    if isinstance(node, Leaf):
        yield node.raw
    elif isinstance(node, Array):
        yield node.header
        for item in node.items or ():
            yield from parts(item)
    else:
        yield node.null_marker
        for _, child in node.fields:
            yield from parts(child)
        yield node.tag_count
        for entry in node.tagged:
            yield entry.header
            yield from parts(entry.node)


def joined(node: Node) -> bytes:
    """The bytes ``node`` was read from (with placeholders where leaves were replaced)."""
    return b"".join(parts(node))

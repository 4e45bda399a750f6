"""Bounds checks on a request body before kio's native reader sees it.

kio's reader reserves memory for an array from the count the client sent
(count x 8 bytes) before it compares the count with the bytes left, so one
20-byte request with a compact count of 2**32 - 1 aborts the whole process in
Rust ("memory allocation of 34359738352 bytes failed"). It also hands back
None for a null array or string where the schema forbids null, and handlers
then fail iterating over it. Kafka refuses both in its generated readers
("Tried to allocate a collection of size N, but there are only M bytes
remaining"; "non-nullable field was serialized as null"), so kshim does the
same here, walking the bytes against kio's dataclass for the request and
reading nothing into memory.

Wire forms (https://kafka.apache.org/protocol#protocol_types): a legacy string
has an int16 length, bytes, records and arrays an int32 length or count, -1
meaning null. Flexible versions (KIP-482) use an unsigned varint holding
length + 1, 0 meaning null, and end every struct with a tagged-field section:
a varint count, then per field a varint tag, a varint size and that many bytes.
A nullable single struct starts with an int8 marker, negative meaning null
(KIP-893). Tagged fields are not part of the positional sequence.

Each dataclass is compiled once into a tuple of small step functions; a step
takes ``(data, position, end)``, reads nothing at or past ``end`` and returns
the position after its field.
"""

from __future__ import annotations

import dataclasses
import struct
import types
import typing
from collections.abc import Callable, Mapping

from kio.static.protocol import Entity

from kshim.protocol.primitives import DecodeError

Buffer = bytes | bytearray | memoryview
Step = Callable[[Buffer, int, int], int]

FIXED_SIZES: dict[str, int] = {
    "int8": 1,
    "int16": 2,
    "int32": 4,
    "int64": 8,
    "uint8": 1,
    "uint16": 2,
    "uint32": 4,
    "uint64": 8,
    "float64": 8,
    "bool": 1,
    "uuid": 16,  # a null uuid is sixteen zero bytes, not a marker
    "error_code": 2,
    "timedelta_i32": 4,
    "timedelta_i64": 8,
    "datetime_i64": 8,
}
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
LEGACY_LENGTHS: dict[str, struct.Struct] = {"string": INT16, "bytes": INT32, "records": INT32}
ARRAY_COUNT = INT32
NULL_LENGTH = -1
COMPACT_NULL = 0
COMPACT_LENGTH_MINIMUM = 1  # a one-byte varint
# kio and Kafka read an unsigned varint of at most five bytes (ByteUtils.readUnsignedVarint).
MAX_VARINT_BYTES = 5
VARINT_CONTINUATION = 0x80
VARINT_PAYLOAD = 0x7F
VARINT_SHIFT = 7
TAGGED_FIELD_MINIMUM = 2  # one byte of tag and one of size at the least
TAGGED_SECTION_MINIMUM = 1  # an empty section is a single zero count
NULLABLE_STRUCT_MARKER_SIZE = 1
INT8_SIGN = 0x80
# Kafka checks a count against the bytes left as if each item took one byte at least,
# so an array of empty structs cannot claim more items than the frame has bytes.
ITEM_MINIMUM = 1


@dataclasses.dataclass(frozen=True)
class Layout:
    """How to check one field: its step, the fewest bytes it takes, whether always that many."""

    step: Step
    minimum: int
    fixed: bool


_STRUCTS: dict[type[Entity], Layout] = {}


def check_body(cls: type[Entity], data: Buffer, offset: int = 0) -> int:
    """Checks that ``data[offset:]`` can be decoded as ``cls`` without over-reading.

    Returns the position just after the body; trailing bytes are the caller's
    business. Raises DecodeError when a length or count runs past the end of
    ``data``, a null appears where ``cls`` forbids one, or a varint is malformed.
    Raises NotImplementedError for a field type kio does not define either.
    Safe from any thread: the compiled plans are cached, and a race only compiles twice.
    """
    return struct_layout(cls).step(data, offset, len(data))


def struct_layout(cls: type[Entity]) -> Layout:
    """Returns the compiled check of kio dataclass ``cls``, cached per class."""
    layout = _STRUCTS.get(cls)
    if layout is None:
        layout = _STRUCTS[cls] = _compile_struct(cls)
    return layout


# --- compiling --------------------------------------------------------------------------


def _compile_struct(cls: type[Entity]) -> Layout:
    hints = typing.get_type_hints(cls)
    flexible = bool(cls.__flexible__)
    positional: list[tuple[str, Layout]] = []
    tagged: dict[int, Step] = {}
    for field in dataclasses.fields(cls):
        if field.name.startswith("__"):
            continue
        name = f"{cls.__name__}.{field.name}"
        layout = _compile_field(name, hints[field.name], field.metadata, flexible)
        if "tag" in field.metadata:
            tagged[int(field.metadata["tag"])] = layout.step
        else:
            positional.append((name, layout))
    steps = _merge_fixed_runs(positional)
    minimum = sum(layout.minimum for _, layout in positional)
    if not flexible:
        if all(layout.fixed for _, layout in positional):
            return _fixed(", ".join(name for name, _ in positional) or cls.__name__, minimum)
        return Layout(_sequence(steps), minimum, fixed=False)
    return Layout(
        _sequence_then_tags(steps, tagged, cls.__name__),
        minimum + TAGGED_SECTION_MINIMUM,
        fixed=False,
    )


def _merge_fixed_runs(positional: list[tuple[str, Layout]]) -> tuple[Step, ...]:
    """One skip for each run of fixed-size fields (acks and timeout are six bytes)."""
    steps: list[Step] = []
    run: list[tuple[str, Layout]] = []
    for name, layout in positional:
        if layout.fixed:
            run.append((name, layout))
            continue
        if run:
            steps.append(_merged(run))
            run = []
        steps.append(layout.step)
    if run:
        steps.append(_merged(run))
    return tuple(steps)


def _merged(run: list[tuple[str, Layout]]) -> Step:
    if len(run) == 1:
        return run[0][1].step
    names = ", ".join(name for name, _ in run)
    return _fixed(names, sum(layout.minimum for _, layout in run)).step


def _compile_field(
    name: str, hint: object, metadata: Mapping[str, object], flexible: bool
) -> Layout:
    nullable = False
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        inner = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        nullable = len(inner) < len(typing.get_args(hint))
        (hint,) = inner
    if typing.get_origin(hint) is tuple:
        item = _compile_item(name, typing.get_args(hint)[0], metadata, flexible)
        return _array(name, item, nullable, flexible)
    if dataclasses.is_dataclass(hint):
        nested = struct_layout(hint)  # type: ignore[arg-type]
        return _nullable_struct(name, nested) if nullable else nested
    return _scalar(name, _kafka_type(metadata), nullable, flexible)


def _compile_item(
    name: str, hint: object, metadata: Mapping[str, object], flexible: bool
) -> Layout:
    if dataclasses.is_dataclass(hint):
        return struct_layout(hint)  # type: ignore[arg-type]
    # Items of a scalar array are never null: nullability belongs to the array (kio writers).
    return _scalar(f"{name}[]", _kafka_type(metadata), nullable=False, flexible=flexible)


def _kafka_type(metadata: Mapping[str, object]) -> str | None:
    """The field's wire type as kio's field metadata names it (``int16``, ``string``...)."""
    kafka_type = metadata.get("kafka_type")
    return kafka_type if isinstance(kafka_type, str) else None


def _scalar(name: str, kafka_type: str | None, nullable: bool, flexible: bool) -> Layout:
    if kafka_type in FIXED_SIZES:
        return _fixed(name, FIXED_SIZES[kafka_type])
    if kafka_type in LEGACY_LENGTHS:
        if flexible:
            return Layout(_compact_length(name, nullable), COMPACT_LENGTH_MINIMUM, fixed=False)
        width = LEGACY_LENGTHS[kafka_type]
        return Layout(_legacy_length(name, width, nullable), width.size, fixed=False)
    raise NotImplementedError(f"{name}: no bounds check for kafka_type {kafka_type!r}")


# --- steps ------------------------------------------------------------------------------


def _past_end(name: str, needed: int, position: int, end: int) -> DecodeError:
    return DecodeError(f"{name}: needs {needed} bytes, only {max(end - position, 0)} left")


def _null_error(name: str) -> DecodeError:
    return DecodeError(f"{name}: null in a non-nullable field")


def _fixed(name: str, size: int) -> Layout:
    def check(data: Buffer, position: int, end: int) -> int:
        after = position + size
        if after > end:
            raise _past_end(name, size, position, end)
        return after

    return Layout(check, size, fixed=True)


def _sequence(steps: tuple[Step, ...]) -> Step:
    def check(data: Buffer, position: int, end: int) -> int:
        for step in steps:
            position = step(data, position, end)
        return position

    return check


def _sequence_then_tags(steps: tuple[Step, ...], tagged: Mapping[int, Step], name: str) -> Step:
    def check(data: Buffer, position: int, end: int) -> int:
        for step in steps:
            position = step(data, position, end)
        # Nearly every struct carries no tagged field: a single zero byte.
        if position < end and data[position] == 0:
            return position + 1
        return _tagged_fields(name, tagged, data, position, end)

    return check


def _tagged_fields(
    name: str, tagged: Mapping[int, Step], data: Buffer, position: int, end: int
) -> int:
    count, position = read_varint(name, data, position, end)
    if count * TAGGED_FIELD_MINIMUM > end - position:
        raise _past_end(f"{name} tagged fields", count * TAGGED_FIELD_MINIMUM, position, end)
    for _ in range(count):
        tag, position = read_varint(name, data, position, end)
        size, position = read_varint(name, data, position, end)
        field_end = position + size
        if field_end > end:
            raise _past_end(f"{name} tag {tag}", size, position, end)
        known = tagged.get(tag)
        if known is not None:
            known(data, position, field_end)  # a known tag's value must fit its own size
        position = field_end
    return position


def read_varint(name: str, data: Buffer, position: int, end: int) -> tuple[int, int]:
    """Returns (value, next position) of an unsigned varint of at most five bytes.

    Raises DecodeError when it runs past ``end`` or its fifth byte continues.
    """
    if position < end:
        byte = data[position]
        if byte < VARINT_CONTINUATION:
            return byte, position + 1
    value = 0
    for index in range(MAX_VARINT_BYTES):
        if position >= end:
            raise DecodeError(f"{name}: varint runs past the end")
        byte = data[position]
        position += 1
        value |= (byte & VARINT_PAYLOAD) << (VARINT_SHIFT * index)
        if byte < VARINT_CONTINUATION:
            return value, position
    raise DecodeError(f"{name}: varint longer than {MAX_VARINT_BYTES} bytes")


def _legacy_length(name: str, width: struct.Struct, nullable: bool) -> Step:
    unpack = width.unpack_from
    size = width.size

    def check(data: Buffer, position: int, end: int) -> int:
        start = position + size
        if start > end:
            raise _past_end(name, size, position, end)
        length: int = unpack(data, position)[0]
        if length < 0:
            if length == NULL_LENGTH and nullable:
                return start
            raise _null_error(name) if length == NULL_LENGTH else _negative(name, length)
        if start + length > end:
            raise _past_end(name, length, start, end)
        return start + length

    return check


def _negative(name: str, length: int) -> DecodeError:
    return DecodeError(f"{name}: negative length {length}")


def _compact_length(name: str, nullable: bool) -> Step:
    def check(data: Buffer, position: int, end: int) -> int:
        encoded, position = read_varint(name, data, position, end)
        if encoded == COMPACT_NULL:
            if nullable:
                return position
            raise _null_error(name)
        after = position + encoded - 1
        if after > end:
            raise _past_end(name, encoded - 1, position, end)
        return after

    return check


def _array(name: str, item: Layout, nullable: bool, flexible: bool) -> Layout:
    items = _items(name, item)
    if flexible:

        def check_compact(data: Buffer, position: int, end: int) -> int:
            encoded, position = read_varint(name, data, position, end)
            if encoded == COMPACT_NULL:
                if nullable:
                    return position
                raise _null_error(name)
            return items(data, position, end, encoded - 1)

        return Layout(check_compact, COMPACT_LENGTH_MINIMUM, fixed=False)

    unpack = ARRAY_COUNT.unpack_from
    size = ARRAY_COUNT.size

    def check_legacy(data: Buffer, position: int, end: int) -> int:
        start = position + size
        if start > end:
            raise _past_end(name, size, position, end)
        count: int = unpack(data, position)[0]
        if count < 0:
            if count == NULL_LENGTH and nullable:
                return start
            raise _null_error(name) if count == NULL_LENGTH else _negative(name, count)
        return items(data, start, end, count)

    return Layout(check_legacy, size, fixed=False)


def _items(name: str, item: Layout) -> Callable[[Buffer, int, int, int], int]:
    """Checks ``count`` items, refusing a count the bytes left cannot hold before looping."""
    minimum = max(item.minimum, ITEM_MINIMUM)
    step = item.step
    fixed = item.fixed
    item_size = item.minimum

    def check(data: Buffer, position: int, end: int, count: int) -> int:
        if count * minimum > end - position:
            raise DecodeError(
                f"{name}: {count} items cannot fit in the {end - position} bytes left"
            )
        if fixed:
            return position + count * item_size
        for _ in range(count):
            position = step(data, position, end)
        return position

    return check


def _nullable_struct(name: str, nested: Layout) -> Layout:
    step = nested.step

    def check(data: Buffer, position: int, end: int) -> int:
        if position >= end:
            raise _past_end(name, NULLABLE_STRUCT_MARKER_SIZE, position, end)
        if data[position] & INT8_SIGN:  # a negative marker: null, as Kafka reads it
            return position + 1
        return step(data, position + 1, end)

    return Layout(check, NULLABLE_STRUCT_MARKER_SIZE, fixed=False)

"""Two brokers' answers to the same request, compared part by part after normalisation.

Both bodies are walked into trees that keep every byte (compat_tests/wire_tree.py). The
values that two brokers cannot share are then replaced by placeholders, as the table
``NORMALISED`` says, each row with its reason; every other byte must be equal. What is
left different is a list of ``Difference``: the path of the part (array items named by
their key where the items have one), what kshim sent and what Kafka sent.

Placeholders keep identity: the first member id met in an answer becomes ``<member#1>``
on both sides, the second ``<member#2>``, so a JoinGroup answer whose ``leader`` is not its
``member_id`` still differs from one where it is. A value that stands for "none" (null,
"", -1, the zero UUID, and a field's own, as session id 0) is never replaced: a broker that
leaves out a topic id the other sends shows.
"""

from __future__ import annotations

import datetime
import enum
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from compat_tests.wire_tree import Array, Leaf, Node, Struct, Tagged

ABSENT = "absent"
NONE_NUMBER = -1
NULL = "null"
ALL_APIS: frozenset[int] = frozenset()  # an empty set in a rule: every API


@dataclass(frozen=True, slots=True)
class Normalised:
    """Fields named ``field`` (regular or tagged, at any depth) in the answers of ``apis``
    (ALL_APIS: every one) hold a value of ``kind``: "port" (must be the broker's own port)
    or an identity kind whose values are numbered in order of appearance. ``none`` is a
    value the field gives for "none" besides the common ones (is_none_value), kept as it
    is."""

    field: str
    kind: str
    why: str
    apis: frozenset[int] = ALL_APIS
    none: object = None  # None is "none" already

    def applies(self, api_key: int, name: str) -> bool:
        return name == self.field and (not self.apis or api_key in self.apis)


OWN_PORT = "port"
FETCH, LIST_GROUPS, JOIN_GROUP, CREATE_PARTITIONS = 1, 16, 11, 37
DESCRIBE_USER_SCRAM_CREDENTIALS = 50
NO_SESSION = 0  # Fetch's session id when no fetch session was opened (KIP-227)

NORMALISED: tuple[Normalised, ...] = (
    Normalised("port", OWN_PORT, "each broker listens on a port of its own; it must be that one"),
    Normalised("cluster_id", "cluster", "a random id made when the storage is formatted"),
    Normalised("topic_id", "topic_id", "a random UUID made when the topic is created"),
    Normalised("member_id", "member", "client id + '-' + a random UUID (KIP-394)"),
    Normalised("leader", "member", "JoinGroup's leader is a member id", frozenset({JOIN_GROUP})),
    Normalised("producer_id", "producer", "handed out by each broker's own counter"),
    Normalised("transaction_start_time", "time", "the wall clock when the transaction began"),
    Normalised(
        "session_id",
        "session",
        "a fetch session's id, drawn at random by each broker (KIP-227)",
        frozenset({FETCH}),
        none=NO_SESSION,
    ),
)


@dataclass(frozen=True, slots=True)
class Scoped:
    """In the answers of ``api_key``, the top-level array ``array`` keeps only the items
    whose ``key`` field holds a name made by the case under test (``only_own``), and
    compares them in the order of that key (``sort``)."""

    api_key: int
    array: str
    key: str
    why: str
    only_own: bool = True
    sort: bool = True


SCOPED: tuple[Scoped, ...] = (
    Scoped(
        LIST_GROUPS,
        "groups",
        "group_id",
        "ListGroups lists every group on the broker: those of earlier cases too (and on kshim "
        "the hand-written test's), in the order of a hash map on Kafka",
    ),
    Scoped(
        CREATE_PARTITIONS,
        "results",
        "name",
        "Kafka answers in the order of a HashSet of the names asked (ControllerApis."
        "createPartitions), kshim in the order asked; clients match results by name",
        only_own=False,
    ),
    Scoped(
        DESCRIBE_USER_SCRAM_CREDENTIALS,
        "results",
        "user",
        "Kafka answers in the order of a HashMap of the names asked (ScramImage.describe), "
        "kshim in the order asked; clients match results by user",
        only_own=False,
    ),
)


@dataclass(frozen=True, slots=True)
class Placeholder:
    text: str

    def __repr__(self) -> str:
        return self.text


@dataclass
class Normaliser:
    """Replaces the values ``rules`` name in one broker's answer to ``api_key``, and keeps
    only the items ``scopes`` name that start with ``own_names``."""

    api_key: int
    own_port: int
    own_names: str
    rules: tuple[Normalised, ...] = NORMALISED
    scopes: tuple[Scoped, ...] = SCOPED
    seen: dict[str, dict[Any, Placeholder]] = field(default_factory=dict)

    def struct(self, answer: Struct) -> Struct:
        """The whole answer, normalised."""
        normalised = self.node(self.scoped(answer), "")
        assert isinstance(normalised, Struct)
        return normalised

    def scoped(self, answer: Struct) -> Struct:
        fields = list(answer.fields)
        for scope in self.scopes:
            if scope.api_key != self.api_key:
                continue
            for index, (name, node) in enumerate(fields):
                if name == scope.array and isinstance(node, Array) and node.items is not None:
                    fields[index] = (name, self.scope_array(node, scope))
        return replace(answer, fields=tuple(fields))

    def scope_array(self, array: Array, scope: Scoped) -> Array:
        keyed = [(key_of(item, scope.key), item) for item in array.items or ()]
        if scope.only_own:
            keyed = [(key, item) for key, item in keyed if key.startswith(self.own_names)]
        if scope.sort:
            keyed.sort(key=lambda pair: pair[0])
        header = f"<{len(keyed)} items>".encode() if scope.only_own else array.header
        return Array(header, tuple(item for _, item in keyed))

    def node(self, node: Node, name: str) -> Node:
        if isinstance(node, Leaf):
            return self.leaf(node, name)
        if isinstance(node, Array):
            if node.items is None:
                return node
            return replace(node, items=tuple(self.node(item, name) for item in node.items))
        fields = tuple((child, self.node(value, child)) for child, value in node.fields)
        tagged = tuple(
            replace(entry, node=self.node(entry.node, entry.name or "")) for entry in node.tagged
        )
        return replace(node, fields=fields, tagged=tagged)

    def leaf(self, leaf: Leaf, name: str) -> Leaf:
        rule = next((rule for rule in self.rules if rule.applies(self.api_key, name)), None)
        if rule is None or is_none_value(leaf.value) or leaf.value == rule.none:
            return leaf
        if rule.kind == OWN_PORT:
            if leaf.value != self.own_port:
                return leaf  # a wrong port stays a number and shows as a difference
            placeholder = Placeholder("<own port>")
        else:
            numbered = self.seen.setdefault(rule.kind, {})
            placeholder = numbered.setdefault(
                leaf.value, Placeholder(f"<{rule.kind}#{len(numbered) + 1}>")
            )
        return Leaf(placeholder, placeholder.text.encode())


def key_of(item: Node, key: str) -> str:
    """The text of ``item``'s field ``key`` ("" when it has none)."""
    value = item.field(key) if isinstance(item, Struct) else None
    return str(value.value) if isinstance(value, Leaf) else ""


def is_none_value(value: Any) -> bool:
    """True for a value that stands for "none": null, "", the zero UUID, and -1, Kafka's
    "no producer", "no node", "no port" (0 is a producer id like any other)."""
    if value is None or value in ("", b""):
        return True
    if isinstance(value, uuid.UUID):
        return value.int == 0
    return isinstance(value, int) and value == NONE_NUMBER


@dataclass(frozen=True, slots=True)
class Difference:
    """One part that differs: where, and each broker's value rendered as text ("absent"
    for a part one broker left out, "null" for a null)."""

    path: str
    kshim: str
    kafka: str

    def __str__(self) -> str:
        return f"{self.path}: kshim {self.kshim}, kafka {self.kafka}"


def differences(kshim: Node, kafka: Node, path: str = "") -> list[Difference]:
    """Every part where the two trees differ, bytes included; [] when they are equal."""
    return list(_differences(kshim, kafka, path))


def _differences(kshim: Node, kafka: Node, path: str) -> Iterator[Difference]:
    if isinstance(kshim, Struct) and isinstance(kafka, Struct):
        yield from _struct_differences(kshim, kafka, path)
    elif isinstance(kshim, Array) and isinstance(kafka, Array):
        yield from _array_differences(kshim, kafka, path)
    elif isinstance(kshim, Leaf) and isinstance(kafka, Leaf):
        if kshim.raw != kafka.raw:
            yield Difference(path, render(kshim), render(kafka))
    else:
        yield Difference(path, render(kshim), render(kafka))


def _struct_differences(kshim: Struct, kafka: Struct, path: str) -> Iterator[Difference]:
    if kshim.null_marker != kafka.null_marker:
        yield Difference(path + " (null marker)", kshim.null_marker.hex(), kafka.null_marker.hex())
    for (name, ours), (_, theirs) in zip(kshim.fields, kafka.fields, strict=True):
        yield from _differences(ours, theirs, _join(path, name))
    yield from _tagged_differences(kshim.tagged, kafka.tagged, path)


def _tagged_differences(
    kshim: tuple[Tagged, ...], kafka: tuple[Tagged, ...], path: str
) -> Iterator[Difference]:
    """Tagged fields by tag: one sent by a broker only (even with its default value), then
    the values of those both sent, then their order on the wire."""
    ours = {entry.tag: entry for entry in kshim}
    theirs = {entry.tag: entry for entry in kafka}
    for tag in sorted(ours.keys() | theirs.keys()):
        mine, other = ours.get(tag), theirs.get(tag)
        name = _join(path, tagged_name(mine or other))  # type: ignore[arg-type]
        if mine is None or other is None:
            yield Difference(name, _render_tagged(mine), _render_tagged(other))
            continue
        if mine.header != other.header and isinstance(mine.node, Leaf):
            yield Difference(name + " (size)", mine.header.hex(), other.header.hex())
        yield from _differences(mine.node, other.node, name)
    common = [tag for tag in ours if tag in theirs]
    if common != [tag for tag in theirs if tag in ours]:
        yield Difference(_join(path, "(tagged field order)"), str(common), str(list(theirs)))


def tagged_name(entry: Tagged) -> str:
    return entry.name if entry.name is not None else f"(unknown tag {entry.tag})"


def _render_tagged(entry: Tagged | None) -> str:
    if entry is None:
        return ABSENT
    return f"sent ({render(entry.node)})"


def _array_differences(kshim: Array, kafka: Array, path: str) -> Iterator[Difference]:
    if kshim.items is None or kafka.items is None:
        if kshim.items is not kafka.items:
            yield Difference(path, render(kshim), render(kafka))
        return
    keys = item_keys(kshim.items), item_keys(kafka.items)
    if keys[0] is None or keys[1] is None:
        if len(kshim.items) != len(kafka.items):
            yield Difference(path, render(kshim), render(kafka))
        for index, (ours, theirs) in enumerate(zip(kshim.items, kafka.items, strict=False)):
            yield from _differences(ours, theirs, f"{path}[{index}]")
        return
    yield from _keyed_differences(kshim.items, kafka.items, keys[0], keys[1], path)


def _keyed_differences(
    kshim: tuple[Node, ...],
    kafka: tuple[Node, ...],
    kshim_keys: list[Any],
    kafka_keys: list[Any],
    path: str,
) -> Iterator[Difference]:
    """Items matched by key: the ones only one broker lists, then each common item; then
    the order, when both list the common items in different orders."""
    ours = dict(zip(kshim_keys, kshim, strict=True))
    theirs = dict(zip(kafka_keys, kafka, strict=True))
    for key in kshim_keys + [key for key in kafka_keys if key not in ours]:
        where = f"{path}[{key!r}]"
        if key not in theirs:
            yield Difference(where, render(ours[key]), ABSENT)
        elif key not in ours:
            yield Difference(where, ABSENT, render(theirs[key]))
        else:
            yield from _differences(ours[key], theirs[key], where)
    common_kshim = [key for key in kshim_keys if key in theirs]
    common_kafka = [key for key in kafka_keys if key in ours]
    if common_kshim != common_kafka:
        yield Difference(f"{path} (order)", repr(common_kshim), repr(common_kafka))


# Fields that name an item of an array in Kafka's messages, tried in a struct's field order.
KEY_FIELDS = frozenset(
    {
        "api_key",
        "group_id",
        "index",
        "key",
        "member_id",
        "name",
        "node_id",
        "partition",
        "partition_index",
        "producer_id",
        "resource_name",
        "topic",
        "transactional_id",
        "user",
    }
)


def item_keys(items: tuple[Node, ...]) -> list[Any] | None:
    """The items' keys (their first field that names them, a string or an integer), when
    every item is a struct with one and no two share it; None otherwise."""
    keys = []
    for item in items:
        if not isinstance(item, Struct):
            return None
        named = [node for name, node in item.fields if name in KEY_FIELDS]
        if not named or not isinstance(named[0], Leaf):
            return None
        if not isinstance(named[0].value, (str, int, Placeholder)):
            return None
        keys.append(_plain(named[0].value))
    return keys if len(set(keys)) == len(keys) else None


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Placeholder):
        return value.text
    return value


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def render(node: Node | Any) -> str:
    """A part as short text for a report."""
    if isinstance(node, Leaf):
        return render_value(node.value)
    if isinstance(node, Array):
        return NULL if node.items is None else f"{len(node.items)} items"
    if isinstance(node, Struct):
        inner = ", ".join(f"{name}={render(value)}" for name, value in node.fields[:4])
        more = ", ..." if len(node.fields) > 4 or node.tagged else ""
        return f"{{{inner}{more}}}"
    return repr(node)


RENDERERS: tuple[tuple[type[Any], Callable[[Any], str]], ...] = (
    (enum.Enum, lambda value: f"{value.name.upper()}({value.value})"),
    (bytes, lambda value: repr(value) if len(value) <= 24 else f"{len(value)} bytes"),
    (datetime.timedelta, lambda value: f"{int(value.total_seconds() * 1000)} ms"),
    (tuple, lambda value: repr(list(value))),
)


def render_value(value: Any) -> str:
    if value is None:
        return NULL
    for kind, renderer in RENDERERS:
        if isinstance(value, kind):
            return renderer(value)
    return repr(value)

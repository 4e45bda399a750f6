"""Pure checks of a history (history.py) against what was read back after the faults.

Each function returns the violations it found, empty when the history is valid:

- ``check_appends``: every acknowledged record is present exactly once, at the offset it
  was acknowledged at, a process's records in the order it wrote them, no record that was
  never written, offsets dense (the log guarantees of Kafka's idempotent producer, KIP-98);
- ``check_transactions``: read_committed sees every record of a committed transaction and
  none of an aborted one, a transaction nobody knows the end of is all or nothing, and no
  transaction is left undecided once the coordinator finished them (KIP-98);
- ``check_compacted``: after compaction each key's last value is its last acknowledged one
  or one written after it (Kafka's log compaction guarantee);
- ``check_committed_offsets``: a group's committed offset never passes what was consumed;
- ``check_delayed``: every acknowledged delayed record is delivered once, none early;
- ``check_full_view``: ``T.full`` holds, per key, a value the model allows.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tests.faults.history import History, Kind, Observed, Op, Stored


@dataclass(frozen=True, slots=True)
class Violation:
    kind: str
    detail: str


def check_appends(history: History, observed: Observed, dense: bool = True) -> list[Violation]:
    """Acknowledged appends and transactional writes against the partitions read back."""
    violations = _duplicates_and_phantoms(history, observed)
    located = _locations(observed)
    for op in history.completions("append", Kind.OK):
        for index, write in enumerate(op.writes):
            found = located.get(write.value)
            if write.partition not in observed:
                continue
            if found is None or found[0] != write.partition:
                violations.append(Violation("lost", f"{write.value} acknowledged by {op.process}"))
            elif op.offset is not None and found[1] != op.offset + index:
                detail = f"{write.value} acknowledged at {op.offset + index}, read at {found[1]}"
                violations.append(Violation("moved", detail))
    violations += _reordered(history, located, observed.keys())
    for partition, records in observed.items():
        violations += _offsets(partition, records, dense)
    return violations


def _locations(observed: Observed) -> dict[str, tuple[str, int]]:
    return {
        record.value: (partition, record.offset)
        for partition, records in observed.items()
        for record in records
        if record.marker is None and record.value is not None
    }


def _duplicates_and_phantoms(history: History, observed: Observed) -> list[Violation]:
    counts = Counter(
        record.value
        for records in observed.values()
        for record in records
        if record.marker is None and record.value is not None
    )
    written = history.invoked_values()
    violations = [
        Violation("duplicate", f"{value} read {count} times")
        for value, count in counts.items()
        if count > 1
    ]
    violations += [
        Violation("phantom", f"{value} was never written") for value in counts.keys() - written
    ]
    return violations


def _reordered(
    history: History, located: Mapping[str, tuple[str, int]], partitions: Iterable[str]
) -> list[Violation]:
    """Per process and partition, the records present must be in the order first written."""
    order: dict[tuple[str, str], list[str]] = defaultdict(list)
    seen: set[str] = set()
    for op in history.ops:
        if op.kind is not Kind.INVOKE:
            continue
        for write in op.writes:
            if write.partition in partitions and write.value not in seen:
                seen.add(write.value)
                order[(op.process, write.partition)].append(write.value)
    violations = []
    for (process, partition), values in order.items():
        offsets = [located[value][1] for value in values if value in located]
        if offsets != sorted(offsets):
            violations.append(Violation("reordered", f"{process}'s records in {partition}"))
    return violations


def _offsets(partition: str, records: list[Stored], dense: bool) -> list[Violation]:
    offsets = [record.offset for record in records]
    if any(later <= earlier for earlier, later in itertools.pairwise(offsets)):
        return [Violation("offsets", f"{partition}: offsets not increasing")]
    if dense and offsets and offsets != list(range(offsets[0], offsets[0] + len(offsets))):
        return [Violation("gap", f"{partition}: offsets not dense")]
    return []


def read_committed(records: Iterable[Stored]) -> tuple[set[str], set[str], set[str]]:
    """The values a read_committed consumer sees, those it skips as aborted, and those of
    transactions with no marker yet (past the last stable offset), from one partition."""
    visible: set[str] = set()
    aborted: set[str] = set()
    open_by_producer: dict[int, list[str]] = defaultdict(list)
    for record in records:
        if record.marker is not None:
            ended = open_by_producer.pop(record.producer, [])
            (visible if record.marker == "commit" else aborted).update(ended)
        elif record.value is None:
            continue
        elif record.transactional:
            open_by_producer[record.producer].append(record.value)
        else:
            visible.add(record.value)
    undecided = {value for values in open_by_producer.values() for value in values}
    return visible, aborted, undecided


def check_transactions(history: History, observed: Observed) -> list[Violation]:
    visible: set[str] = set()
    undecided: set[str] = set()
    for records in observed.values():
        seen, _, pending = read_committed(records)
        visible |= seen
        undecided |= pending
    violations = [Violation("undecided", f"{value} has no marker") for value in sorted(undecided)]
    for op in history.completions("txn", Kind.OK):
        values = {write.value for write in op.writes}
        if op.committed and values - visible:
            missing = sorted(values - visible)
            violations.append(Violation("committed invisible", f"{op.process}: {missing}"))
        if not op.committed and values & visible:
            shown = sorted(values & visible)
            violations.append(Violation("aborted visible", f"{op.process}: {shown}"))
    for op in history.completions("txn", Kind.INFO):
        values = {write.value for write in op.writes}
        if values & visible and values - visible:
            violations.append(Violation("torn transaction", f"{op.process}: part visible"))
    return violations


Slot = tuple[str, str]  # a partition and a key in it


def allowed_latest(
    history: History, partitions: set[str] | None = None
) -> dict[Slot, set[str | None]]:
    """Per key, the values its last record may hold: the last acknowledged write's, or any
    written after it and not known to have failed, in the order writes were invoked (so
    one writer per key: concurrent writers have no such order). ``None`` (absent) is
    allowed until a write of the key is acknowledged. Aborted transactions' writes never
    count."""
    ended: dict[str, Op] = {}
    for op in history.ops:
        if op.kind is not Kind.INVOKE:
            for write in op.writes:
                ended.setdefault(write.value, op)
    allowed: dict[Slot, set[str | None]] = {}
    for op in history.ops:
        for write in op.writes if op.kind is Kind.INVOKE else ():
            if write.key is None or (partitions is not None and write.partition not in partitions):
                continue
            end = ended.get(write.value)
            choices = allowed.setdefault((write.partition, write.key), {None})
            if end is None or end.kind is Kind.INFO:
                choices.add(write.value)
            elif end.kind is Kind.OK and end.committed is not False:
                choices.clear()
                choices.add(write.value)
    return allowed


def check_compacted(history: History, observed: Observed, partitions: set[str]) -> list[Violation]:
    """Each key's last record in the compacted partitions against ``allowed_latest``."""
    latest: dict[Slot, str | None] = {}
    violations = _duplicates_and_phantoms(history, {p: observed[p] for p in partitions})
    for partition in sorted(partitions):
        violations += _offsets(partition, observed[partition], dense=False)
        for record in observed[partition]:
            if record.key is not None and record.marker is None:
                latest[(partition, record.key)] = record.value
    return violations + _against_model("compacted", latest, allowed_latest(history, partitions))


def check_full_view(
    history: History, view: Mapping[Slot, str | None], partitions: set[str]
) -> list[Violation]:
    """``T.full`` ((partition, key) -> value, None for a tombstone) against
    ``allowed_latest``."""
    return _against_model("full view", view, allowed_latest(history, partitions))


def _against_model(
    name: str, latest: Mapping[Slot, str | None], allowed: Mapping[Slot, set[str | None]]
) -> list[Violation]:
    violations = []
    for key in sorted(allowed.keys() | latest.keys()):
        value = latest.get(key)
        if value not in allowed.get(key, {None}):
            violations.append(Violation(f"{name} stale", f"{key[0]} key {key[1]} holds {value}"))
    return violations


def check_committed_offsets(
    consumed: Mapping[str, int], committed: Mapping[str, int]
) -> list[Violation]:
    """Per partition, the committed offset against the next offset the consumer had read
    when it committed (a commit may lag what was read, never lead it)."""
    return [
        Violation(
            "offset ahead",
            f"{partition}: committed {offset}, consumed to {consumed.get(partition, 0)}",
        )
        for partition, offset in sorted(committed.items())
        if offset > consumed.get(partition, 0)
    ]


@dataclass(frozen=True, slots=True)
class Delivery:
    """A delayed record seen in its target topic, ``seen_ms`` on the consumer's clock."""

    value: str
    seen_ms: int


def check_delayed(history: History, deliveries: Iterable[Delivery]) -> list[Violation]:
    """Acknowledged delayed records arrive once, unacknowledged ones at most once, none
    before it was due, none that was never sent."""
    due = {write.value: op.due_ms for op in history.ops if op.f == "delay" for write in op.writes}
    arrivals = Counter[str]()
    violations = []
    for delivery in deliveries:
        arrivals[delivery.value] += 1
        due_ms = due.get(delivery.value)
        if delivery.value not in due:
            violations.append(Violation("phantom", f"delayed {delivery.value} never sent"))
        elif due_ms is not None and delivery.seen_ms < due_ms:
            early = due_ms - delivery.seen_ms
            violations.append(Violation("delay early", f"{delivery.value} {early} ms early"))
    violations += [
        Violation("delay duplicate", f"{value} delivered {count} times")
        for value, count in arrivals.items()
        if count > 1
    ]
    for op in history.completions("delay", Kind.OK):
        violations += [
            Violation("delay lost", f"{write.value} never delivered")
            for write in op.writes
            if write.value not in arrivals
        ]
    return violations

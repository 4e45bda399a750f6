"""Each checker against hand-made histories: a valid one passes, and one with each kind
of violation is caught (so every checker is shown able to fail)."""

from __future__ import annotations

from tests.faults.checker import (
    Delivery,
    check_appends,
    check_committed_offsets,
    check_compacted,
    check_delayed,
    check_full_view,
    check_transactions,
)
from tests.faults.history import History, Kind, Observed, Stored, Write

P = "t-0"


def _appended(values: list[str], outcome: Kind = Kind.OK, process: str = "p") -> History:
    history = History()
    for offset, value in enumerate(values):
        op = history.invoke(process, "append", (Write(P, value),))
        history.complete(op, outcome, offset)
    return history


def _log(*values: str) -> Observed:
    return {P: [Stored(offset, value) for offset, value in enumerate(values)]}


def _kinds(violations: list) -> set[str]:  # type: ignore[type-arg]
    return {violation.kind for violation in violations}


def test_appends_valid_and_each_violation() -> None:
    history = _appended(["a", "b", "c"])
    assert check_appends(history, _log("a", "b", "c")) == []
    assert _kinds(check_appends(history, _log("a", "b"))) == {"lost"}
    assert "duplicate" in _kinds(check_appends(history, _log("a", "b", "c", "c")))
    assert "phantom" in _kinds(check_appends(history, _log("a", "b", "c", "z")))
    assert "reordered" in _kinds(check_appends(history, _log("b", "a", "c")))
    shifted: Observed = {P: [Stored(offset + 1, v) for offset, v in enumerate("abc")]}
    assert "moved" in _kinds(check_appends(history, shifted))
    gap: Observed = {P: [Stored(0, "a"), Stored(1, "b"), Stored(3, "c")]}
    assert "gap" in _kinds(check_appends(history, gap))


def test_unacknowledged_appends_may_be_missing() -> None:
    assert check_appends(_appended(["a", "b"], Kind.INFO), _log("a")) == []


def _transaction(history: History, values: list[str], kind: Kind, committed: bool | None) -> None:
    op = history.invoke("t", "txn", tuple(Write(P, value) for value in values))
    history.complete(op, kind, committed=committed)


def _transactional(*records: tuple[str | None, str | None]) -> Observed:
    stored = []
    for offset, (value, marker) in enumerate(records):
        stored.append(Stored(offset, value, producer=7, transactional=True, marker=marker))
    return {P: stored}


def test_transactions_valid_and_each_violation() -> None:
    history = History()
    _transaction(history, ["a"], Kind.OK, True)
    _transaction(history, ["b"], Kind.OK, False)
    _transaction(history, ["c", "d"], Kind.INFO, None)
    valid = _transactional(("a", None), (None, "commit"), ("b", None), (None, "abort"))
    assert check_transactions(history, valid) == []
    aborted_visible = _transactional(("a", None), (None, "commit"), ("b", None), (None, "commit"))
    assert _kinds(check_transactions(history, aborted_visible)) == {"aborted visible"}
    committed_aborted = _transactional(("a", None), (None, "abort"))
    assert _kinds(check_transactions(history, committed_aborted)) == {"committed invisible"}
    open_left = _transactional(("a", None), (None, "commit"), ("b", None))
    assert _kinds(check_transactions(history, open_left)) == {"undecided"}
    torn = _transactional(("a", None), (None, "commit"), ("c", None), (None, "commit"))
    assert _kinds(check_transactions(history, torn)) == {"torn transaction"}


def _keyed(history: History, key: str, value: str, kind: Kind) -> None:
    op = history.invoke("c", "append", (Write(P, value, key),))
    history.complete(op, kind)


def test_compacted_and_full_view_against_the_model() -> None:
    history = History()
    _keyed(history, "k", "v1", Kind.OK)
    _keyed(history, "k", "v2", Kind.INFO)  # may or may not be there
    _keyed(history, "j", "w1", Kind.FAIL)
    for records in (["v1"], ["v1", "v2"]):
        observed: Observed = {P: [Stored(at, value, "k") for at, value in enumerate(records)]}
        assert check_compacted(history, observed, {P}) == []
    for latest in ("v1", "v2"):
        assert check_full_view(history, {(P, "k"): latest}, {P}) == []
    assert _kinds(check_compacted(history, {P: []}, {P})) == {"compacted stale"}
    failed_shown: Observed = {P: [Stored(0, "v1", "k"), Stored(2, "w1", "j")]}
    assert _kinds(check_compacted(history, failed_shown, {P})) == {"compacted stale"}
    _keyed(history, "k", "v3", Kind.OK)
    assert _kinds(check_full_view(history, {(P, "k"): "v2"}, {P})) == {"full view stale"}
    assert check_full_view(history, {(P, "k"): "v3"}, {P}) == []


def test_committed_offsets_never_ahead_of_consumption() -> None:
    assert check_committed_offsets({P: 5}, {P: 5}) == []
    assert _kinds(check_committed_offsets({P: 5}, {P: 6})) == {"offset ahead"}
    assert _kinds(check_committed_offsets({}, {P: 1})) == {"offset ahead"}


def test_delayed_records_once_and_never_early() -> None:
    history = History()
    op = history.invoke("d", "delay", (Write(P, "x"),), due_ms=1_000)
    history.complete(op, Kind.OK)
    assert check_delayed(history, [Delivery("x", 1_000)]) == []
    assert _kinds(check_delayed(history, [])) == {"delay lost"}
    assert _kinds(check_delayed(history, [Delivery("x", 999)])) == {"delay early"}
    twice = [Delivery("x", 1_000), Delivery("x", 1_200)]
    assert _kinds(check_delayed(history, twice)) == {"delay duplicate"}
    assert "phantom" in _kinds(check_delayed(history, [Delivery("x", 1_000), Delivery("y", 0)]))

"""A Jepsen-style history of the operations a fault schedule ran, and what was read back.

Each client operation is recorded twice: when it is invoked and when it completes, as
``ok`` (it happened), ``fail`` (it certainly did not) or ``info`` (nobody knows: the
broker died or the disk failed before the answer), as Jepsen records them (Kingsbury,
"Jepsen: Knossos", docs/references.md). Values are unique strings, so a value read back
names the one operation that wrote it. The checkers (checker.py) are pure functions of
a history and of what was read after the last fault.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Kind(enum.Enum):
    INVOKE = "invoke"
    OK = "ok"
    FAIL = "fail"
    INFO = "info"


@dataclass(frozen=True, slots=True)
class Write:
    """One record: its partition (``topic-partition``), key and unique value."""

    partition: str
    value: str
    key: str | None = None


@dataclass(frozen=True, slots=True)
class Op:
    """One step of a history. ``f`` names the operation: ``append`` (one batch, ``offset``
    its base offset once ok), ``txn`` (a transaction's writes; ``committed`` says how it
    ended once ok), ``delay`` (a record due at ``due_ms``)."""

    process: str
    kind: Kind
    f: str
    writes: tuple[Write, ...]
    offset: int | None = None
    committed: bool | None = None
    due_ms: int | None = None


@dataclass(slots=True)
class History:
    ops: list[Op] = field(default_factory=list)

    def invoke(
        self, process: str, f: str, writes: tuple[Write, ...], due_ms: int | None = None
    ) -> Op:
        op = Op(process, Kind.INVOKE, f, writes, due_ms=due_ms)
        self.ops.append(op)
        return op

    def complete(
        self, invoked: Op, kind: Kind, offset: int | None = None, committed: bool | None = None
    ) -> None:
        self.ops.append(
            Op(invoked.process, kind, invoked.f, invoked.writes, offset, committed, invoked.due_ms)
        )

    def completions(self, f: str, kind: Kind) -> list[Op]:
        return [op for op in self.ops if op.f == f and op.kind is kind]

    def invoked_values(self) -> set[str]:
        return {write.value for op in self.ops if op.kind is Kind.INVOKE for write in op.writes}


@dataclass(frozen=True, slots=True)
class Stored:
    """One record read back from a partition. ``marker`` is ``commit``/``abort`` for a
    control record; ``producer`` the batch's producer id (-1 for none)."""

    offset: int
    value: str | None
    key: str | None = None
    producer: int = -1
    transactional: bool = False
    marker: str | None = None


# What was read back after the last fault, by partition, in offset order.
Observed = dict[str, list[Stored]]

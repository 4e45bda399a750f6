"""Fixed-width text tables for the command line's reports (``kshim groups``, ``kshim
delays``), as Kafka's tools print them: a header line, columns two spaces apart; or, with
``--json``, one JSON object per row in the table's place."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Protocol, TypeVar


class JsonRow(Protocol):
    def to_json(self) -> object:
        """The row as a JSON value (a dict of Kafka's names, for the reports)."""
        ...


RowT = TypeVar("RowT", bound=JsonRow)


def fixed_width_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], left_aligned: Collection[int]
) -> str:
    """The columns in ``left_aligned`` (indexes) padded on the right, the others (numbers)
    right-aligned; no trailing spaces."""
    cells = [header, *rows]
    widths = [max(len(line[column]) for line in cells) for column in range(len(header))]
    return "\n".join(
        "  ".join(
            value.ljust(width) if column in left_aligned else value.rjust(width)
            for column, (value, width) in enumerate(zip(line, widths, strict=True))
        ).rstrip()
        for line in cells
    )


def json_or_table(
    rows: list[RowT], as_json: bool, table: Callable[[list[RowT]], str]
) -> Iterator[str]:
    """The lines a report prints: one JSON object per row with ``as_json`` (--json), else
    the one text of ``table`` (even of no rows: its header alone)."""
    if as_json:
        yield from (json.dumps(row.to_json()) for row in rows)
    else:
        yield table(rows)

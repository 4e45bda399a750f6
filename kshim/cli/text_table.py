"""Fixed-width text tables for the command line's reports (``kshim groups``, ``kshim
delays``), as Kafka's tools print them: a header line, columns two spaces apart."""

from __future__ import annotations

from collections.abc import Collection, Sequence


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

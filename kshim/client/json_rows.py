"""A result row of an admin client that ``--json`` prints as one JSON object of its fields."""

from __future__ import annotations

from dataclasses import Field, asdict
from typing import ClassVar


class JsonRow:
    """For a dataclass row: ``to_json`` is its fields by name, nested rows as objects.
    Without slots of its own, so that a slotted row keeps no ``__dict__``."""

    __slots__ = ()
    # What makes a class a dataclass to ``asdict``; each row's @dataclass sets it.
    __dataclass_fields__: ClassVar[dict[str, Field[object]]]

    def to_json(self) -> dict[str, object]:
        return asdict(self)

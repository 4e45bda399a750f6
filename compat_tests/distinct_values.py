"""Sample kio entities for codec round trips: every field set, no value a default."""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
import uuid
from typing import Any

from kio.schema.errors import ErrorCode


class DistinctValues:
    """Fills a kio dataclass with values that differ from every default and from each other."""

    def __init__(self) -> None:
        self.counter = 0

    def next(self) -> int:
        self.counter += 1
        return self.counter

    def entity(self, cls: type[Any]) -> Any:
        hints = typing.get_type_hints(cls)
        values = {
            field.name: self.value(hints[field.name])
            for field in dataclasses.fields(cls)
            if not field.name.startswith("__")
        }
        return cls(**values)

    def value(self, hint: Any) -> Any:
        origin = typing.get_origin(hint)
        if origin in (typing.Union, types.UnionType):
            inner = [arg for arg in typing.get_args(hint) if arg is not type(None)]
            return self.value(inner[0])
        if origin is tuple:
            item = typing.get_args(hint)[0]
            return (self.value(item), self.value(item))
        if dataclasses.is_dataclass(hint):
            return self.entity(hint)  # type: ignore[arg-type]
        return self.scalar(hint)

    def scalar(self, hint: Any) -> Any:
        number = self.next()
        if hint is bool:
            return True
        if isinstance(hint, type) and issubclass(hint, ErrorCode):
            codes = [code for code in ErrorCode if code.value > 0]
            return codes[number % len(codes)]
        if isinstance(hint, type) and issubclass(hint, bytes):
            return hint(b"v%d" % number)
        if isinstance(hint, type) and issubclass(hint, str):
            return hint(f"s{number}")
        if hint is uuid.UUID:
            return uuid.UUID(int=number)
        if isinstance(hint, type) and issubclass(hint, datetime.timedelta):
            return datetime.timedelta(milliseconds=number)
        if isinstance(hint, type) and issubclass(hint, datetime.datetime):
            start = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)
            return start + datetime.timedelta(milliseconds=number)
        if isinstance(hint, type) and issubclass(hint, float):
            return hint(number + 0.5)
        if isinstance(hint, type) and issubclass(hint, int):
            high = getattr(hint, "__high__", 2**31 - 1)
            return hint(min(number, high))
        raise TypeError(f"no sample value for {hint!r}")

"""LMDB as kshim uses it, typed: environments, transactions and cursors over bytes, and the
one error an LMDB failure becomes outside storage.

The protocols below name the few methods kshim calls, with the types kshim relies on
(keys and values are ``bytes``: no transaction is begun with ``buffers=True``), whether
or not the installed binding ships types of its own (lmdb 3 does, older ones do not).
``lmdb.open``'s environment satisfies ``Environment`` as it is: nothing wraps a
transaction, so a ``get`` or ``put`` costs what it costs without the types.

Opening an environment (``open_environment``) and the store methods tools call on a data
directory (``translate_lmdb_errors``: the CLI's) raise ``LmdbFailed`` rather than
``lmdb.Error``, with the binding's error as its cause, so nothing outside storage imports
the binding. Inside the broker an LMDB failure of any other call is one of kshim's own
failures, as before, whatever its class.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from typing import Literal, ParamSpec, Protocol, TypeVar, overload

import lmdb


class LmdbFailed(Exception):
    """An LMDB environment could not be opened, read or written: the message is the
    binding's (``lmdb.Error``, kept as ``__cause__``)."""


# A named database of an environment (``Environment.open_db``): an opaque handle.
Database = lmdb._Database


class Cursor(Protocol):
    """A position in one database of a transaction."""

    def set_range(self, key: bytes, /) -> bool:
        """Moves to the first key at or after ``key``; False when there is none."""
        ...

    def key(self) -> bytes:
        """The current key; ``b""`` past the last one."""
        ...

    def delete(self) -> bool:
        """Deletes the current entry and moves to the next one."""
        ...

    @overload
    def iternext(
        self, keys: Literal[True] = True, values: Literal[True] = True
    ) -> Iterator[tuple[bytes, bytes]]: ...

    @overload
    def iternext(
        self, keys: Literal[True] = True, *, values: Literal[False]
    ) -> Iterator[bytes]: ...

    def __iter__(self) -> Iterator[tuple[bytes, bytes]]:
        """(key, value) from the current position on (from the first key if unset)."""
        ...


class Transaction(Protocol):
    """A read or write transaction; as a context manager it commits on leaving without an
    exception and aborts otherwise. ``db`` defaults to the one it was begun on."""

    def get(
        self, key: bytes, default: None = None, *, db: Database | None = None
    ) -> bytes | None: ...

    def put(self, key: bytes, value: bytes, *, db: Database | None = None) -> bool: ...

    def delete(self, key: bytes, *, db: Database | None = None) -> bool:
        """Whether there was an entry to delete."""
        ...

    def cursor(self, db: Database | None = None) -> Cursor: ...

    def stat(self, db: Database) -> Mapping[str, object]:
        """The database's statistics: ``entries`` is how many keys it holds."""
        ...

    def __enter__(self) -> Transaction: ...

    def __exit__(self, *details: object) -> None: ...


class Environment(Protocol):
    """An open LMDB environment (``lmdb.open``)."""

    def begin(self, *, db: Database | None = None, write: bool = False) -> Transaction: ...

    def open_db(self, key: bytes, *, create: bool = True) -> Database: ...

    def close(self) -> None: ...


# lmdb.NotFoundError: open_db(create=False) of a database the environment does not hold.
DatabaseNotFound: type[Exception] = lmdb.NotFoundError


def open_environment(
    directory: str,
    *,
    max_dbs: int,
    map_size: int = 10 << 20,
    sync: bool = True,
    readonly: bool = False,
    create: bool = True,
) -> Environment:
    """The environment in ``directory`` (``lmdb.open`` with these options, whose defaults
    are lmdb's). Raises LmdbFailed when it cannot be opened or created."""
    try:
        environment: Environment = lmdb.open(
            directory,
            max_dbs=max_dbs,
            map_size=map_size,
            sync=sync,
            readonly=readonly,
            create=create,
        )
    except lmdb.Error as error:
        raise LmdbFailed(str(error)) from error
    return environment


_P = ParamSpec("_P")
_R = TypeVar("_R")


def translate_lmdb_errors(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """``function``, raising LmdbFailed where LMDB raised ``lmdb.Error``: for what tools
    outside storage call, so that they need not know the binding."""

    @functools.wraps(function)
    def translated(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return function(*args, **kwargs)
        except lmdb.Error as error:
            raise LmdbFailed(str(error)) from error

    return translated

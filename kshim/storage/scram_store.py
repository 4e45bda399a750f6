"""Users' SCRAM credentials (KIP-554), durable in LMDB, as Kafka keeps them in its metadata
log (UserScramCredentialRecord): salt, StoredKey, ServerKey and iteration count, never a
password.

Key: ``user (UTF-8) NUL int8 mechanism``, the mechanism as KIP-554 numbers it (1 is
SCRAM-SHA-256, 2 is SCRAM-SHA-512). The mechanism is the key's last byte and the NUL the one
before, so a name holding NUL still splits one way, and a user's credentials sort together.
Value, big-endian::

    iterations         int32
    salt_length        int16
    salt               bytes
    stored_key_length  int16
    stored_key         bytes
    server_key         bytes   to the end of the value

Every write is one LMDB transaction committed with fsync before it returns (the
environment is opened with ``sync=True``). Methods block: call them off the event loop.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import lmdb

from kshim.storage import lmdb_keys as keys

_MECHANISM = struct.Struct(">b")
_ITERATIONS = struct.Struct(">i")
_LENGTH = struct.Struct(">h")
# LMDB's default limit on a key (mdb_env_get_maxkeysize); a longer name cannot be stored.
MAX_KEY_BYTES = 511
MAX_USER_BYTES = MAX_KEY_BYTES - len(keys.NAME_TERMINATOR) - _MECHANISM.size


@dataclass(frozen=True, slots=True)
class StoredScramCredential:
    mechanism: int  # KIP-554's number
    salt: bytes = field(repr=False)
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int

    def to_bytes(self) -> bytes:
        return b"".join(
            (
                _ITERATIONS.pack(self.iterations),
                _LENGTH.pack(len(self.salt)),
                self.salt,
                _LENGTH.pack(len(self.stored_key)),
                self.stored_key,
                self.server_key,
            )
        )

    @classmethod
    def from_bytes(cls, mechanism: int, data: bytes) -> StoredScramCredential:
        (iterations,) = _ITERATIONS.unpack_from(data, 0)
        salt, position = _counted(data, _ITERATIONS.size)
        stored_key, position = _counted(data, position)
        return cls(mechanism, salt, stored_key, bytes(data[position:]), iterations)


def _counted(data: bytes, position: int) -> tuple[bytes, int]:
    """The int16-counted bytes at ``position``, and the position after them."""
    (length,) = _LENGTH.unpack_from(data, position)
    start = position + _LENGTH.size
    return bytes(data[start : start + length]), start + length


def scram_key(user: str, mechanism: int) -> bytes:
    """``user NUL int8 mechanism``; raises ValueError for a name over MAX_USER_BYTES."""
    name = user.encode("utf-8")
    if len(name) > MAX_USER_BYTES:
        raise ValueError(f"a user name is at most {MAX_USER_BYTES} bytes of UTF-8")
    return name + keys.NAME_TERMINATOR + _MECHANISM.pack(mechanism)


def split_scram_key(key: bytes) -> tuple[str, int]:
    """Inverse of ``scram_key``: (user, mechanism)."""
    (mechanism,) = _MECHANISM.unpack_from(key, len(key) - _MECHANISM.size)
    return key[: -len(keys.NAME_TERMINATOR) - _MECHANISM.size].decode("utf-8"), mechanism


UserMechanism = tuple[str, int]
METADATA_MAX_DATABASES = 16  # the metadata store's named databases (metadata.MetadataStore)


class ScramStore:
    """SCRAM credentials inside the metadata store's LMDB environment."""

    def __init__(self, environment: Any) -> None:
        self._env = environment
        self._db = environment.open_db(keys.SCRAM_DB)

    def get(self, user: str, mechanism: int) -> StoredScramCredential | None:
        with self._env.begin(db=self._db) as txn:
            value = txn.get(scram_key(user, mechanism))
        return None if value is None else StoredScramCredential.from_bytes(mechanism, value)

    def all(self) -> dict[UserMechanism, StoredScramCredential]:
        """Every credential, by (user, mechanism), in key order."""
        result = {}
        with self._env.begin(db=self._db) as txn:
            for key, value in txn.cursor():
                user, mechanism = split_scram_key(bytes(key))
                result[user, mechanism] = StoredScramCredential.from_bytes(mechanism, bytes(value))
        return result

    def put(self, user: str, credential: StoredScramCredential) -> None:
        """Stores (or replaces) ``user``'s credential of its mechanism, fsynced."""
        self.alter([(user, credential)], [])

    def delete(self, user: str, mechanism: int) -> bool:
        """Removes ``user``'s credential of ``mechanism``; whether there was one."""
        with self._env.begin(db=self._db, write=True) as txn:
            deleted: bool = txn.delete(scram_key(user, mechanism))
        return deleted

    def alter(
        self,
        upsertions: Iterable[tuple[str, StoredScramCredential]],
        deletions: Iterable[UserMechanism],
    ) -> None:
        """Applies every deletion and upsertion in one transaction, fsynced before it
        returns: an AlterUserScramCredentials request is applied whole or not at all, as
        Kafka's controller writes its records atomically. Raises ValueError (nothing
        written) for a user name over MAX_USER_BYTES."""
        puts = [
            (scram_key(user, credential.mechanism), credential) for user, credential in upsertions
        ]
        removals = [scram_key(user, mechanism) for user, mechanism in deletions]
        with self._env.begin(db=self._db, write=True) as txn:
            for key in removals:
                txn.delete(key)
            for key, credential in puts:
                txn.put(key, credential.to_bytes())


def read_credentials(directory: str) -> dict[UserMechanism, StoredScramCredential]:
    """Every credential in the metadata store at ``directory``, opened read-only: a tool
    may read a running broker's (LMDB lets readers in beside its one writer). Raises
    lmdb.Error when there is no store there or it cannot be read."""
    environment = lmdb.open(directory, max_dbs=METADATA_MAX_DATABASES, readonly=True)
    try:
        try:
            environment.open_db(keys.SCRAM_DB, create=False)
        except lmdb.NotFoundError:
            return {}  # no credential was ever stored
        return ScramStore(environment).all()
    finally:
        environment.close()

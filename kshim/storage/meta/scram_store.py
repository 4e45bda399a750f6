"""Users' SCRAM credentials (KIP-554), durable in LMDB, as Kafka keeps them in its metadata
log (UserScramCredentialRecord): salt, StoredKey, ServerKey and iteration count, never a
password.

Key: ``lmdb_keys.scram_key``, the user and the mechanism as KIP-554 numbers it (1 is
SCRAM-SHA-256, 2 is SCRAM-SHA-512). Value, big-endian::

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

from kshim.storage.meta import lmdb_keys as keys
from kshim.storage.meta.lmdb_types import (
    DatabaseNotFound,
    Environment,
    open_environment,
    translate_lmdb_errors,
)

_ITERATIONS = struct.Struct(">i")
_LENGTH = struct.Struct(">h")
MAX_USER_BYTES = keys.SCRAM_MAX_USER_BYTES  # a longer name does not fit its credential's key


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


UserMechanism = tuple[str, int]
METADATA_MAX_DATABASES = 16  # the metadata store's named databases (metadata.MetadataStore)


class ScramStore:
    """SCRAM credentials inside the metadata store's LMDB environment."""

    def __init__(self, environment: Environment) -> None:
        self._env = environment
        self._db = environment.open_db(keys.SCRAM_DB)

    def get(self, user: str, mechanism: int) -> StoredScramCredential | None:
        with self._env.begin(db=self._db) as txn:
            value = txn.get(keys.scram_key(user, mechanism))
        return None if value is None else StoredScramCredential.from_bytes(mechanism, value)

    def all(self) -> dict[UserMechanism, StoredScramCredential]:
        """Every credential, by (user, mechanism), in key order."""
        result = {}
        with self._env.begin(db=self._db) as txn:
            for key, value in txn.cursor():
                user, mechanism = keys.split_scram_key(bytes(key))
                result[user, mechanism] = StoredScramCredential.from_bytes(mechanism, bytes(value))
        return result

    @translate_lmdb_errors
    def put(self, user: str, credential: StoredScramCredential) -> None:
        """Stores (or replaces) ``user``'s credential of its mechanism, fsynced; raises
        LmdbFailed when it cannot be written."""
        self.alter([(user, credential)], [])

    def delete(self, user: str, mechanism: int) -> bool:
        """Removes ``user``'s credential of ``mechanism``; whether there was one."""
        with self._env.begin(db=self._db, write=True) as txn:
            deleted: bool = txn.delete(keys.scram_key(user, mechanism))
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
            (keys.scram_key(user, credential.mechanism), credential)
            for user, credential in upsertions
        ]
        removals = [keys.scram_key(user, mechanism) for user, mechanism in deletions]
        with self._env.begin(db=self._db, write=True) as txn:
            for key in removals:
                txn.delete(key)
            for key, credential in puts:
                txn.put(key, credential.to_bytes())


@translate_lmdb_errors
def read_credentials(directory: str) -> dict[UserMechanism, StoredScramCredential]:
    """Every credential in the metadata store at ``directory``, opened read-only: a tool
    may read a running broker's (LMDB lets readers in beside its one writer). Raises
    LmdbFailed when there is no store there or it cannot be read."""
    environment = open_environment(directory, max_dbs=METADATA_MAX_DATABASES, readonly=True)
    try:
        try:
            environment.open_db(keys.SCRAM_DB, create=False)
        except DatabaseNotFound:
            return {}  # no credential was ever stored
        return ScramStore(environment).all()
    finally:
        environment.close()

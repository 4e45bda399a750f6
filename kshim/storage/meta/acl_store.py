"""ACL bindings, durable in LMDB (Kafka keeps them as AccessControlEntryRecords in its
metadata log; kshim in the metadata store's environment, database ``acls``).

One entry per binding. The value is the binding itself, big-endian::

    resource_type   int8    Kafka's ResourceType code (TOPIC 2, GROUP 3, CLUSTER 4, ...)
    pattern_type    int8    PatternType code (LITERAL 3, PREFIXED 4)
    operation       int8    AclOperation code (READ 3, WRITE 4, ...)
    permission      int8    AclPermissionType code (DENY 2, ALLOW 3)
    resource_name   uint32 length, then that many bytes of UTF-8
    principal       uint32 length, UTF-8 (``User:alice``)
    host            uint32 length, UTF-8 (an IP address, or ``*``)

The key is the SHA-256 of the value (``lmdb_keys.key_digest``): a binding is identified by
all its fields, as Kafka's are, so storing one twice keeps one entry, a binding is deleted
knowing only itself, and a long resource name or principal never meets LMDB's 511-byte
key limit.

Every write is one LMDB transaction committed with fsync before it returns (the
environment is opened with ``sync=True``), so an acknowledged CreateAcls or DeleteAcls
survives kill -9. Methods block: call them off the event loop.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from kshim.storage.meta import lmdb_keys as keys
from kshim.storage.meta.lmdb_types import Environment

_CODES = struct.Struct(">bbbb")
_LENGTH = struct.Struct(">I")


class AclLayoutError(ValueError):
    """A stored value that is not an encoded binding."""


@dataclass(frozen=True, slots=True)
class AclRecord:
    """One ACL binding as stored: Kafka's codes and strings, no meaning attached
    (kshim/protocol/acls.py gives them theirs, through kshim/broker/security/acls/records.py)."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    def to_bytes(self) -> bytes:
        codes = _CODES.pack(self.resource_type, self.pattern_type, self.operation, self.permission)
        texts = (self.resource_name, self.principal, self.host)
        return codes + b"".join(_length_prefixed(text) for text in texts)

    @classmethod
    def from_bytes(cls, data: bytes) -> AclRecord:
        """Inverse of ``to_bytes``; raises AclLayoutError for anything else."""
        try:
            resource_type, pattern_type, operation, permission = _CODES.unpack_from(data, 0)
            position = _CODES.size
            texts = []
            for _ in range(3):
                text, position = _read_text(data, position)
                texts.append(text)
        except (struct.error, UnicodeDecodeError) as error:
            raise AclLayoutError(f"not an ACL binding: {error}") from error
        if position != len(data):
            raise AclLayoutError(f"{len(data) - position} bytes after an ACL binding")
        name, principal, host = texts
        return cls(resource_type, name, pattern_type, principal, host, operation, permission)

    def key(self) -> bytes:
        return keys.key_digest(self.to_bytes())


def _length_prefixed(text: str) -> bytes:
    encoded = text.encode("utf-8")
    return _LENGTH.pack(len(encoded)) + encoded


def _read_text(data: bytes, position: int) -> tuple[str, int]:
    (length,) = _LENGTH.unpack_from(data, position)
    start = position + _LENGTH.size
    if start + length > len(data):
        raise AclLayoutError("a string runs past the end of an ACL binding")
    return data[start : start + length].decode("utf-8"), start + length


class AclStore:
    """The ACL bindings inside the metadata store's LMDB environment."""

    def __init__(self, environment: Environment) -> None:
        self._env = environment
        self._db = environment.open_db(keys.ACLS_DB)

    def load(self) -> list[AclRecord]:
        """Every stored binding, in key order; raises AclLayoutError for a value that is
        not one."""
        with self._env.begin(db=self._db) as txn:
            return [AclRecord.from_bytes(bytes(value)) for _, value in txn.cursor()]

    def add(self, records: Iterable[AclRecord]) -> None:
        """Stores all ``records`` atomically, fsynced before returning; one already
        stored stays stored once."""
        with self._env.begin(db=self._db, write=True) as txn:
            for record in records:
                txn.put(record.key(), record.to_bytes())

    def remove(self, records: Iterable[AclRecord]) -> None:
        """Deletes all ``records`` atomically, fsynced before returning; one not stored
        is no error."""
        with self._env.begin(db=self._db, write=True) as txn:
            for record in records:
                txn.delete(record.key())

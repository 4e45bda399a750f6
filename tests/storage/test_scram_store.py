"""SCRAM credentials in the metadata store (storage/meta/scram_store.py): each write kept across
a reopen, an alter applied whole or not at all, and names of any text as keys."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kshim.storage.meta.lmdb_keys import scram_key, split_scram_key
from kshim.storage.meta.metadata import MetadataStore
from kshim.storage.meta.scram_store import MAX_USER_BYTES, StoredScramCredential

SHA_256, SHA_512 = 1, 2


def credential(
    mechanism: int = SHA_256, iterations: int = 4096, seed: int = 0
) -> StoredScramCredential:
    size = 32 if mechanism == SHA_256 else 64
    return StoredScramCredential(
        mechanism,
        bytes([seed]) * 24,
        bytes([seed + 1]) * size,
        bytes([seed + 2]) * size,
        iterations,
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MetadataStore]:
    opened = MetadataStore(str(tmp_path / "meta"))
    yield opened
    opened.close()


def reopened(tmp_path: Path, store: MetadataStore) -> MetadataStore:
    store.close()
    return MetadataStore(str(tmp_path / "meta"))


def test_empty(store: MetadataStore) -> None:
    assert store.scram.all() == {}
    assert store.scram.get("alice", SHA_256) is None
    assert not store.scram.delete("alice", SHA_256)


def test_value_round_trip() -> None:
    for mechanism in (SHA_256, SHA_512):
        stored = credential(mechanism, 16384, seed=7)
        assert StoredScramCredential.from_bytes(mechanism, stored.to_bytes()) == stored
    empty_salt = StoredScramCredential(SHA_256, b"", b"k" * 32, b"s" * 32, 4096)
    assert StoredScramCredential.from_bytes(SHA_256, empty_salt.to_bytes()) == empty_salt


@pytest.mark.parametrize("user", ["alice", "a,b=c", "ünï", "nul\x00inside", "x" * MAX_USER_BYTES])
def test_keys_split_back_into_user_and_mechanism(user: str) -> None:
    assert split_scram_key(scram_key(user, SHA_512)) == (user, SHA_512)


def test_a_name_too_long_for_a_key_is_refused(store: MetadataStore) -> None:
    with pytest.raises(ValueError, match="at most"):
        scram_key("x" * (MAX_USER_BYTES + 1), SHA_256)
    too_long = "ü" * (MAX_USER_BYTES // 2 + 1)  # two bytes each
    with pytest.raises(ValueError):
        store.scram.alter([("alice", credential()), (too_long, credential())], [])
    assert store.scram.all() == {}  # nothing of the refused alter was written


def test_puts_and_deletes_survive_a_reopen(tmp_path: Path, store: MetadataStore) -> None:
    store.scram.put("alice", credential(SHA_256, seed=1))
    store.scram.put("alice", credential(SHA_512, 8192, seed=2))
    store.scram.put("bob", credential(SHA_256, seed=3))
    store.scram.put("bob", credential(SHA_256, 16384, seed=4))  # replaces
    assert store.scram.delete("alice", SHA_256)
    store = reopened(tmp_path, store)
    try:
        assert store.scram.all() == {
            ("alice", SHA_512): credential(SHA_512, 8192, seed=2),
            ("bob", SHA_256): credential(SHA_256, 16384, seed=4),
        }
        assert store.scram.get("bob", SHA_256) == credential(SHA_256, 16384, seed=4)
        assert store.scram.get("alice", SHA_256) is None
    finally:
        store.close()


def test_alter_applies_deletions_and_upsertions_together(
    tmp_path: Path, store: MetadataStore
) -> None:
    store.scram.put("alice", credential())
    store.scram.put("bob", credential())
    store.scram.alter(
        [("carol", credential(SHA_512)), ("alice", credential(SHA_512))],
        [("alice", SHA_256), ("bob", SHA_256)],
    )
    store = reopened(tmp_path, store)
    try:
        assert list(store.scram.all()) == [("alice", SHA_512), ("carol", SHA_512)]
    finally:
        store.close()


def test_all_is_by_user_then_mechanism(store: MetadataStore) -> None:
    for user in ("carol", "alice", "bob"):
        for mechanism in (SHA_512, SHA_256):
            store.scram.put(user, credential(mechanism))
    assert list(store.scram.all()) == [
        (user, mechanism) for user in ("alice", "bob", "carol") for mechanism in (1, 2)
    ]


def test_repr_shows_no_secret() -> None:
    shown = repr(credential(seed=0x41))
    assert "AAAA" not in shown and "BBBB" not in shown and "4096" in shown

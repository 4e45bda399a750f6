"""ACL bindings in the metadata store's LMDB environment: the value layout, atomic adds and
removals, and bindings that are still there after the store is closed and reopened."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kshim.storage.meta import lmdb_keys
from kshim.storage.meta.acl_store import AclLayoutError, AclRecord
from kshim.storage.meta.metadata import MetadataStore

TOPIC, CLUSTER, LITERAL, PREFIXED, READ, ALTER, ALLOW, DENY = 2, 4, 3, 4, 3, 7, 3, 2
ORDERS = AclRecord(TOPIC, "orders", LITERAL, "User:alice", "*", READ, ALLOW)
EVENTS = AclRecord(TOPIC, "events-", PREFIXED, "User:*", "10.0.0.1", READ, DENY)
CLUSTER_ALTER = AclRecord(CLUSTER, "kafka-cluster", LITERAL, "User:ops", "*", ALTER, ALLOW)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MetadataStore]:
    opened = MetadataStore(str(tmp_path / "meta"))
    yield opened
    opened.close()


def reopened(tmp_path: Path, store: MetadataStore) -> MetadataStore:
    store.close()
    return MetadataStore(str(tmp_path / "meta"))


def test_the_value_layout_is_four_codes_then_three_length_prefixed_strings() -> None:
    assert ORDERS.to_bytes() == (
        bytes([TOPIC, LITERAL, READ, ALLOW])
        + b"\x00\x00\x00\x06orders"
        + b"\x00\x00\x00\x0aUser:alice"
        + b"\x00\x00\x00\x01*"
    )
    assert ORDERS.key() == lmdb_keys.key_digest(ORDERS.to_bytes())


texts = st.text(max_size=300)
records = st.builds(
    AclRecord,
    st.integers(-128, 127),
    texts,
    st.integers(-128, 127),
    texts,
    texts,
    st.integers(-128, 127),
    st.integers(-128, 127),
)


@given(records)
def test_every_record_round_trips(record: AclRecord) -> None:
    assert AclRecord.from_bytes(record.to_bytes()) == record


@pytest.mark.parametrize(
    "data",
    [b"", b"\x02\x03\x03", ORDERS.to_bytes()[:-1], ORDERS.to_bytes() + b"x", b"\x02\x03\x03\x03"],
)
def test_anything_else_is_a_layout_error(data: bytes) -> None:
    with pytest.raises(AclLayoutError):
        AclRecord.from_bytes(data)


def test_an_empty_store_has_no_acls(store: MetadataStore) -> None:
    assert store.acls.load() == []


def test_acls_survive_reopening(tmp_path: Path, store: MetadataStore) -> None:
    store.acls.add([ORDERS, EVENTS])
    store.acls.add([CLUSTER_ALTER])
    store = reopened(tmp_path, store)
    try:
        assert sorted(store.acls.load(), key=repr) == sorted(
            [ORDERS, EVENTS, CLUSTER_ALTER], key=repr
        )
        store.acls.remove([EVENTS])
        store = reopened(tmp_path, store)
        assert sorted(store.acls.load(), key=repr) == sorted([ORDERS, CLUSTER_ALTER], key=repr)
    finally:
        store.close()


def test_adding_twice_stores_once_and_removing_the_absent_is_no_error(
    store: MetadataStore,
) -> None:
    store.acls.add([ORDERS, ORDERS])
    store.acls.add([ORDERS])
    assert store.acls.load() == [ORDERS]
    store.acls.remove([EVENTS, ORDERS])
    assert store.acls.load() == []


def test_a_long_name_or_principal_fits_despite_lmdbs_key_limit(store: MetadataStore) -> None:
    long = AclRecord(3, "g" * 5000, LITERAL, "User:" + "x" * 2000, "*", READ, ALLOW)
    store.acls.add([long])
    assert store.acls.load() == [long]


def test_a_failed_add_stores_none_of_its_records(store: MetadataStore) -> None:
    # An int8 code out of range fails while encoding, inside the transaction: the
    # binding before it in the same add is not stored either.
    broken = AclRecord(TOPIC, "orders", LITERAL, "User:bob", "*", 300, ALLOW)
    with pytest.raises(struct.error):
        store.acls.add([ORDERS, broken])
    assert store.acls.load() == []

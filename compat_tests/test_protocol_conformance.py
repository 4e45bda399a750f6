"""Protocol conformance of every API and version kshim advertises.

The list is derived from ``kshim.protocol.apis.ADVERTISED`` when the tests are collected,
so a newly advertised API is covered at once, and its live test fails (never skips) until
it has a case in ``CASES``:

- every served (api, version): a request and a response, filled with distinct non-default
  values, survive encode -> decode -> encode through ``kshim.protocol.codec`` and kio
  unchanged; for Fetch, the hand-written zero-copy encoder produces what kio decodes;
- the lowest and highest served version of every API: a request sent over a raw socket to
  a running kshim, its response decoded with kio's class for that version and compared
  field by field with the whole response Kafka would send.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import types
import typing
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from compat_tests import conformance_cases_data as data
from compat_tests import conformance_cases_groups as groups
from compat_tests import conformance_cases_security as security
from compat_tests import conformance_cases_txn as txn
from compat_tests.brokers import BrokerUnderTest, start_kshim
from compat_tests.conformance_probe import Exchange, Probe, as_stored, record_batch
from kshim.protocol import codec
from kshim.protocol.apis import ADVERTISED, serves
from kshim.protocol.fetch_response import FetchedPartition, FetchedTopic, encode_fetch_response

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(60)]

Case = Callable[[Probe, int], Exchange]

CASES: dict[int, Case] = {
    0: data.produce,
    1: data.fetch,
    2: data.list_offsets,
    3: data.metadata,
    8: groups.offset_commit,
    9: groups.offset_fetch,
    10: groups.find_coordinator,
    11: groups.join_group,
    12: groups.heartbeat,
    13: groups.leave_group,
    14: groups.sync_group,
    15: groups.describe_groups,
    16: groups.list_groups,
    18: data.api_versions,
    19: data.create_topics,
    20: data.delete_topics,
    21: data.delete_records,
    22: groups.init_producer_id,
    24: txn.add_partitions_to_txn,
    25: txn.add_offsets_to_txn,
    26: txn.end_txn,
    28: txn.txn_offset_commit,
    32: data.describe_configs,
    33: data.alter_configs,
    37: data.create_partitions,
    42: groups.delete_groups,
    44: data.incremental_alter_configs,
    47: groups.offset_delete,
    61: txn.describe_producers,
    65: txn.describe_transactions,
    66: txn.list_transactions,
    17: security.sasl_handshake,
    36: security.sasl_authenticate,
    29: security.describe_acls,
    30: security.create_acls,
    31: security.delete_acls,
    50: security.describe_user_scram_credentials,
    51: security.alter_user_scram_credentials,
}


def served_versions(api_key: int) -> list[int]:
    low, high = ADVERTISED[api_key]
    return [version for version in range(low, high + 1) if serves(api_key, version)]


SERVED = [(key, version) for key in sorted(ADVERTISED) for version in served_versions(key)]
EDGES = sorted(
    {
        (key, version)
        for key in ADVERTISED
        for version in (served_versions(key)[0], served_versions(key)[-1])
    }
)


def pair_id(pair: tuple[int, int]) -> str:
    return f"api{pair[0]}-v{pair[1]}"


# --------------------------------------------------------------------------------------
# Round trips through the codecs (no broker)
# --------------------------------------------------------------------------------------


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


def encoded(cls: type[Any], entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(cls)(buffer, entity)
    return buffer.getvalue()


@pytest.mark.parametrize("pair", SERVED, ids=pair_id)
def test_request_round_trip(pair: tuple[int, int]) -> None:
    api_key, version = pair
    cls = codec.request_class(api_key, version)
    entity = DistinctValues().entity(cls)
    wire = codec.encode_entity(cls, entity)

    decoded = codec.decode_request(api_key, version, wire, 0)

    assert decoded == entity
    assert codec.encode_entity(cls, decoded) == wire


@pytest.mark.parametrize("pair", SERVED, ids=pair_id)
def test_response_round_trip(pair: tuple[int, int]) -> None:
    """Through the dict path the handlers use (codec.encode_response), then kio's decoder."""
    api_key, version = pair
    cls = codec.response_class(api_key, version)
    entity = DistinctValues().entity(cls)
    body = {
        field.name: getattr(entity, field.name)
        for field in dataclasses.fields(cls)
        if not field.name.startswith("__")
    }

    wire = codec.encode_response(api_key, version, body)
    decoded, size = entity_reader(cls)(wire, 0)

    assert size == len(wire)
    assert decoded == entity
    assert encoded(cls, decoded) == wire


@pytest.mark.parametrize("version", served_versions(1), ids=lambda v: f"v{v}")
@pytest.mark.parametrize("aborted", [None, [(7, 0)]], ids=["uncommitted", "aborted-list"])
def test_fetch_encoder_matches_kio(version: int, aborted: list[tuple[int, int]] | None) -> None:
    """The zero-copy encoder's parts, joined, are what kio encodes and decodes."""
    batch = as_stored(record_batch(3), 40)
    topics = [
        FetchedTopic(
            "orders",
            [
                FetchedPartition(0, 0, 43, 43, 40, aborted, [batch[:20], memoryview(batch[20:])]),
                FetchedPartition(1, 1, -1, -1, -1, aborted, []),
            ],
        )
    ]

    wire = b"".join(bytes(part) for part in encode_fetch_response(version, topics))  # type: ignore[arg-type]

    cls = codec.response_class(1, version)
    decoded, size = entity_reader(cls)(wire, 0)
    aborted_body = (
        None
        if aborted is None
        else [{"producer_id": producer, "first_offset": first} for producer, first in aborted]
    )
    partitions = [
        {
            "partition_index": 0,
            "error_code": 0,
            "high_watermark": 43,
            "last_stable_offset": 43,
            "log_start_offset": 40,
            "aborted_transactions": aborted_body,
            "preferred_read_replica": -1,
            "records": batch,
        },
        {
            "partition_index": 1,
            "error_code": 1,
            "high_watermark": -1,
            "last_stable_offset": -1,
            "log_start_offset": -1,
            "aborted_transactions": aborted_body,
            "preferred_read_replica": -1,
            "records": b"",
        },
    ]
    expected = {
        "throttle_time": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [{"topic": "orders", "partitions": partitions}],
    }
    assert size == len(wire)
    assert decoded == codec.build(cls, expected, any_version=True)
    assert encoded(cls, decoded) == wire


# --------------------------------------------------------------------------------------
# Live: lowest and highest served version against a running kshim
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def probe() -> Iterator[Probe]:
    broker: BrokerUnderTest = start_kshim()
    try:
        yield Probe(broker.host, broker.port)
    finally:
        broker.stop()


@pytest.mark.wire
@pytest.mark.parametrize("pair", EDGES, ids=pair_id)
def test_response_field_by_field(probe: Probe, pair: tuple[int, int]) -> None:
    api_key, version = pair
    case = CASES.get(api_key)
    if case is None:
        pytest.fail(
            f"kshim advertises API {api_key} but compat_tests/test_protocol_conformance.py "
            "has no case for it: add one to CASES"
        )
    exchange = case(probe, version)

    response = probe.call(api_key, version, exchange.request)

    expected = codec.build(
        codec.response_class(api_key, version), exchange.expect(response), any_version=True
    )
    mismatches = differences(response, expected)
    assert not mismatches, "; ".join(mismatches)
    assert response == expected


def differences(actual: Any, expected: Any, path: str = "response") -> list[str]:
    """Every field where ``actual`` differs from ``expected``, as 'path: actual != expected'."""
    if dataclasses.is_dataclass(expected) and type(actual) is type(expected):
        found = []
        for field in dataclasses.fields(expected):
            found += differences(
                getattr(actual, field.name), getattr(expected, field.name), f"{path}.{field.name}"
            )
        return found
    if isinstance(expected, tuple) and isinstance(actual, tuple) and len(actual) == len(expected):
        found = []
        for index, (got, wanted) in enumerate(zip(actual, expected, strict=True)):
            found += differences(got, wanted, f"{path}[{index}]")
        return found
    return [] if actual == expected else [f"{path}: {actual!r} != {expected!r}"]

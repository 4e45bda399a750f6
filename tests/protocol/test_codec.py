"""Message bodies through kio: responses built from plain dicts, requests decoded.

Every (api_key, version) kshim advertises and kio knows is covered; kio starts
some APIs above kshim's advertised minimum (Produce v0-2), and those are
versions kshim does not serve either.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import itertools
import types
import typing
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from kshim.protocol import codec
from kshim.protocol.apis import ADVERTISED, serves
from kshim.protocol.primitives import DecodeError

Pair = tuple[int, int]


def kio_knows(api_key: int, version: int) -> bool:
    try:
        codec.request_class(api_key, version)
        codec.response_class(api_key, version)
    except KeyError:
        return False
    return True


def advertised_pairs() -> list[Pair]:
    return [
        (api_key, version)
        for api_key, (low, high) in ADVERTISED.items()
        for version in range(low, high + 1)
        if kio_knows(api_key, version)
    ]


PAIRS = advertised_pairs()
PAIR_IDS = [f"api{api_key}v{version}" for api_key, version in PAIRS]


def test_every_served_version_is_known_to_kio() -> None:
    """A version kio lacks can only be one kshim advertises but refuses to serve."""
    for api_key, (low, high) in ADVERTISED.items():
        for version in range(low, high + 1):
            if serves(api_key, version):
                assert kio_knows(api_key, version), (api_key, version)
    assert not kio_knows(0, 2)
    assert not serves(0, 2)


class SampleValues:
    """Distinct plain values per field, as a handler would write them (ints for times)."""

    def __init__(self) -> None:
        self._counter = itertools.count(1)

    def body(self, cls: type[Any]) -> dict[str, Any]:
        hints = typing.get_type_hints(cls)
        return {
            field.name: self.value(hints[field.name], field.metadata.get("kafka_type"))
            for field in dataclasses.fields(cls)
            if not field.name.startswith("__")
        }

    def value(self, hint: Any, kafka_type: str | None) -> Any:
        origin = typing.get_origin(hint)
        if origin in (typing.Union, types.UnionType):
            inner = [arg for arg in typing.get_args(hint) if arg is not type(None)]
            return self.value(inner[0], kafka_type)
        if origin is tuple:
            item = typing.get_args(hint)[0]
            return [self.value(item, kafka_type), self.value(item, kafka_type)]
        if dataclasses.is_dataclass(hint):
            return self.body(typing.cast(type[Any], hint))
        return self.scalar(kafka_type)

    def scalar(self, kafka_type: str | None) -> Any:
        number = next(self._counter)
        values: dict[str | None, Any] = {
            "error_code": [3, 7, 36, 87][number % 4],
            "int8": number % 100,
            "int16": 300 + number,
            "int32": 70_000 + number,
            "int64": 5_000_000_000 + number,
            "bool": number % 2 == 0,
            "string": f"s{number}",
            "timedelta_i32": 1000 + number,
            "timedelta_i64": 86_400_000 + number,
            "datetime_i64": 1_700_000_000_000 + number,
            "uuid": bytes(range(number % 200, number % 200 + 16)),
            "records": b"batch-bytes-%d" % number,
            "bytes": b"opaque-%d" % number,
        }
        return values[kafka_type]


def plain(value: Any) -> Any:
    """A decoded kio value in the plain form handlers use (ms ints, uuid bytes, int codes)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            field.name: plain(getattr(value, field.name))
            for field in dataclasses.fields(value)
            if not field.name.startswith("__")
        }
    if isinstance(value, tuple):
        return [plain(item) for item in value]
    if isinstance(value, ErrorCode):
        return int(value.value)
    if isinstance(value, datetime.timedelta | datetime.datetime):
        return codec.milliseconds(value)
    if isinstance(value, uuid.UUID):
        return value.bytes
    if isinstance(value, bytes):
        return bytes(value)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    return str(value)


def decode_response(api_key: int, version: int, data: bytes) -> Any:
    entity, size = entity_reader(codec.response_class(api_key, version))(data, 0)
    assert size == len(data)
    return entity


def kio_encode(entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


@pytest.mark.parametrize(("api_key", "version"), PAIRS, ids=PAIR_IDS)
def test_response_from_a_full_dict_decodes_to_the_same_values(api_key: int, version: int) -> None:
    body = SampleValues().body(codec.response_class(api_key, version))
    decoded = decode_response(api_key, version, codec.encode_response(api_key, version, body))
    assert plain(decoded) == body


@pytest.mark.parametrize(("api_key", "version"), PAIRS, ids=PAIR_IDS)
def test_response_from_an_empty_dict_uses_defaults(api_key: int, version: int) -> None:
    """Handlers may leave out fields: required ones become empty, null or zero."""
    decoded = decode_response(api_key, version, codec.encode_response(api_key, version, {}))
    for field in dataclasses.fields(decoded):
        value = getattr(decoded, field.name)
        if field.default is not dataclasses.MISSING:
            assert value == field.default, field.name
        elif field.default_factory is not dataclasses.MISSING:
            assert value == field.default_factory(), field.name
        else:
            assert plain(value) in ([], None, 0, "", b"", False, {}), (field.name, value)


@pytest.mark.parametrize(("api_key", "version"), PAIRS, ids=PAIR_IDS)
def test_request_encoded_by_kio_is_decoded(api_key: int, version: int) -> None:
    cls = codec.request_class(api_key, version)
    body = SampleValues().body(cls)
    entity = codec.build(cls, body, any_version=True)
    header = b"\x00\x01\x02"  # decode_request starts at an offset, after the header
    decoded = codec.decode_request(api_key, version, header + kio_encode(entity), len(header))
    assert type(decoded) is cls
    assert decoded == entity
    assert plain(decoded) == body


@pytest.mark.parametrize(("api_key", "version"), PAIRS, ids=PAIR_IDS)
def test_is_flexible_agrees_with_kio(api_key: int, version: int) -> None:
    cls = codec.request_class(api_key, version)
    assert codec.is_flexible(api_key, version) is bool(cls.__flexible__)
    assert codec.response_class(api_key, version).__flexible__ == cls.__flexible__


# First flexible version of each API, from Kafka's message JSON ("flexibleVersions").
# OffsetDelete (47) has no flexible version.
FIRST_FLEXIBLE = {0: 9, 1: 12, 2: 6, 3: 9, 8: 8, 9: 6, 10: 3, 11: 6, 12: 4, 13: 4, 14: 4, 15: 5}
FIRST_FLEXIBLE |= {16: 3, 18: 3, 19: 5, 20: 4, 21: 2, 22: 2, 32: 4, 33: 2, 37: 2, 42: 2, 44: 1}
FIRST_FLEXIBLE |= {47: 1 << 15}


@pytest.mark.parametrize(
    ("api_key", "version"),
    [pair for pair in PAIRS if pair[0] in FIRST_FLEXIBLE],
)
def test_is_flexible_matches_kafka_specs(api_key: int, version: int) -> None:
    assert codec.is_flexible(api_key, version) is (version >= FIRST_FLEXIBLE[api_key])


@pytest.mark.parametrize(("api_key", "version"), PAIRS, ids=PAIR_IDS)
def test_trailing_bytes_after_a_request_are_ignored(api_key: int, version: int) -> None:
    """As Kafka does: librdkafka's all-topics Metadata request carries stray bytes
    (confluentinc/librdkafka#5049)."""
    cls = codec.request_class(api_key, version)
    entity = codec.build(cls, SampleValues().body(cls), any_version=True)
    decoded = codec.decode_request(api_key, version, kio_encode(entity) + b"\x00\x00\x00", 0)
    assert decoded == entity


def sample_request_bytes(api_key: int, version: int) -> bytes:
    cls = codec.request_class(api_key, version)
    return kio_encode(codec.build(cls, SampleValues().body(cls), any_version=True))


# Some requests have an empty body (ApiVersions v0-2, ListGroups v0-2): nothing to truncate.
NONEMPTY_REQUEST_PAIRS = [pair for pair in PAIRS if sample_request_bytes(*pair)]


@pytest.mark.parametrize(("api_key", "version"), NONEMPTY_REQUEST_PAIRS)
def test_truncated_request_raises(api_key: int, version: int) -> None:
    encoded = sample_request_bytes(api_key, version)
    with pytest.raises(DecodeError):
        codec.decode_request(api_key, version, encoded[:-1], 0)


def test_unknown_api_raises_key_error() -> None:
    with pytest.raises(KeyError):
        codec.request_class(9999, 0)
    with pytest.raises(KeyError):
        codec.response_class(0, 2)
    with pytest.raises(KeyError):
        codec.is_flexible(3, 999)


TOPIC_ID = bytes(range(1, 17))  # kio reads the all-zero UUID as null


def test_a_field_no_version_has_is_refused() -> None:
    """A misspelt name must fail, not encode the field's default."""
    with pytest.raises(ValueError, match="throttle_time_ms"):
        codec.encode_response(3, 12, {"throttle_time_ms": 5, "brokers": [], "topics": []})
    with pytest.raises(ValueError, match="no field nmae"):
        codec.build(codec.request_class(3, 12), {"topics": [{"nmae": "t"}]}, any_version=True)


def test_strict_build_refuses_a_missing_required_field() -> None:
    cls = codec.request_class(3, 12)
    with pytest.raises(ValueError, match="needs field topics"):
        codec.build(cls, {"allow_auto_topic_creation": True})
    built = codec.build(cls, {"topics": None, "include_topic_authorized_operations": False})
    assert built.topics is None


def test_response_ignores_fields_the_version_lacks() -> None:
    """A handler's union dict: v0 Metadata has no throttle time, cluster id or topic ids."""
    body = {
        "throttle_time": 5,
        "cluster_id": "cluster",
        "controller_id": 1,
        "brokers": [{"node_id": 1, "host": "localhost", "port": 9092, "rack": "r1"}],
        "topics": [
            {
                "error_code": 0,
                "name": "orders",
                "topic_id": TOPIC_ID,
                "is_internal": False,
                "partitions": [
                    {
                        "error_code": 0,
                        "partition_index": 0,
                        "leader_id": 1,
                        "leader_epoch": 0,
                        "replica_nodes": [1],
                        "isr_nodes": [1],
                        "offline_replicas": [],
                    }
                ],
            }
        ],
    }
    old = plain(decode_response(3, 0, codec.encode_response(3, 0, body)))
    assert old == {
        "brokers": [{"node_id": 1, "host": "localhost", "port": 9092}],
        "topics": [
            {
                "error_code": 0,
                "name": "orders",
                "partitions": [
                    {
                        "error_code": 0,
                        "partition_index": 0,
                        "leader_id": 1,
                        "replica_nodes": [1],
                        "isr_nodes": [1],
                    }
                ],
            }
        ],
    }
    new = plain(decode_response(3, 12, codec.encode_response(3, 12, body)))
    assert new["throttle_time"] == 5
    assert new["cluster_id"] == "cluster"
    assert new["brokers"][0]["rack"] == "r1"
    assert new["topics"][0]["topic_id"] == TOPIC_ID
    assert new["topics"][0]["partitions"][0]["leader_epoch"] == 0


def test_response_values_may_already_be_kio_types() -> None:
    body = {
        "throttle_time": datetime.timedelta(milliseconds=12),
        "responses": [
            {
                "name": "t",
                "partition_responses": [
                    {
                        "index": 0,
                        "error_code": ErrorCode.not_leader_or_follower,
                        "base_offset": 41,
                        "log_append_time": codec.EPOCH + datetime.timedelta(milliseconds=99),
                    }
                ],
            }
        ],
    }
    decoded = decode_response(0, 9, codec.encode_response(0, 9, body))
    partition = decoded.responses[0].partition_responses[0]
    assert partition.error_code == ErrorCode.not_leader_or_follower
    assert codec.milliseconds(partition.log_append_time) == 99
    assert codec.milliseconds(decoded.throttle_time) == 12
    assert partition.log_start_offset == -1  # schema default


def test_null_log_append_time_round_trips_as_minus_one() -> None:
    body = {"responses": [{"name": "t", "partition_responses": [{"log_append_time": None}]}]}
    decoded = decode_response(0, 9, codec.encode_response(0, 9, body))
    assert codec.milliseconds(decoded.responses[0].partition_responses[0].log_append_time) == -1


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, -1),
        (7, 7),
        (datetime.timedelta(seconds=2, milliseconds=5), 2005),
        (datetime.timedelta(milliseconds=-3), -3),
        (codec.EPOCH, 0),
        (codec.EPOCH + datetime.timedelta(milliseconds=1_700_000_000_123), 1_700_000_000_123),
    ],
)
def test_milliseconds(
    value: datetime.timedelta | datetime.datetime | int | None, expected: int
) -> None:
    assert codec.milliseconds(value) == expected


def test_fetch_records_pass_through_as_bytes() -> None:
    batch = b"\x00" * 70
    body = {
        "responses": [
            {
                "topic": "t",
                "partitions": [{"partition_index": 0, "high_watermark": 3, "records": batch}],
            }
        ]
    }
    decoded = decode_response(1, 12, codec.encode_response(1, 12, body))
    partition = decoded.responses[0].partitions[0]
    assert bytes(partition.records) == batch
    assert partition.high_watermark == 3


def test_error_response_may_leave_out_a_required_bytes_field() -> None:
    """SyncGroup answering UNKNOWN_MEMBER_ID has no assignment: it must encode as empty."""
    body = {"error_code": ErrorCode.unknown_member_id}
    decoded = decode_response(14, 5, codec.encode_response(14, 5, body))
    assert decoded.error_code == ErrorCode.unknown_member_id
    assert bytes(decoded.assignment) == b""

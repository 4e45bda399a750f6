"""Protocol conformance of every API and version kshim advertises.

The list is derived from ``kshim.protocol.apis.ADVERTISED`` when the tests are collected,
so a newly advertised API is covered at once, and its live tests fail (never skip) until
it has a case in ``CASES``. The live cases are ``CASES`` (one per API, the ordinary
answer) at every served version, and ``REFUSALS`` (unknown topics, groups, members,
transactional ids, stale epochs, offsets out of range; conformance_cases_*errors.py) at
the lowest and highest (from the first version a case needs: fetch sessions, v7). Three
kinds of test:

- no broker: a request and a response of every served (api, version), filled with
  distinct non-default values, survive encode -> decode -> encode through
  ``kshim.protocol.codec`` and kio unchanged, and the byte-keeping walker of the
  differential test reads every response back whole; for Fetch, the hand-written
  zero-copy encoder produces what kio decodes;
- kshim against Apache Kafka 3.9 (``test_kshim_answers_as_kafka``): for every live case
  at a version both serve, the same setup requests and the same request under test
  (names included) go to a running kshim and to a running Kafka; both answers must decode
  with kio's class for that version, and they are compared part by part, tagged fields
  included (one sent by a broker only, even with its default value, shows), down to their
  bytes, after the normalisation of compat_tests/conformance_diff.py (ports, random ids,
  member and producer ids, clocks, listings of the whole broker). A difference must be on
  the allow-list of compat_tests/conformance_allowed.py, with its reason; any other fails,
  and so does an entry that no longer matches. A version only kshim serves is skipped and
  says so; without Java, Maven or the jars, every one is skipped with that reason;
- kshim against a hand-written expectation (``test_response_field_by_field``): each live
  case's whole response, written out in the cases (Kafka's answer, checked by the test
  above, or kshim's where the allow-list says kshim differs). Kept beside the
  differential test because it runs where Kafka cannot (a machine without Java), pins
  kshim's answers at versions Kafka might not serve, and checks what normalisation hides
  from the differential test: that a member id starts with the client id, that topic ids
  are not zero, that a transaction's start time is now.
"""

from __future__ import annotations

import dataclasses
import io
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kio.serial import entity_reader, entity_writer

from compat_tests import conformance_cases_data as data
from compat_tests import conformance_cases_groups as groups
from compat_tests import conformance_cases_security as security
from compat_tests import conformance_cases_txn as txn
from compat_tests.brokers import BrokerUnderTest, start_kshim
from compat_tests.conformance_allowed import unexplained
from compat_tests.conformance_brokers import (
    KSHIM_SETTINGS,
    kafka_unavailable_reason,
    reference_kafka,
)
from compat_tests.conformance_cases_admin_errors import ADMIN_ERROR_CASES
from compat_tests.conformance_cases_coordinator_errors import COORDINATOR_ERROR_CASES
from compat_tests.conformance_cases_errors import ERROR_CASES
from compat_tests.conformance_cases_fetch import FETCH_CASES, FIRST_VERSIONS
from compat_tests.conformance_diff import Difference, Normaliser, differences
from compat_tests.conformance_probe import Exchange, Probe, as_stored, record_batch
from compat_tests.distinct_values import DistinctValues
from compat_tests.wire_tree import Struct, joined, walk_body
from kshim.client.frames import decode_response, split_response
from kshim.client.wire import parse_bootstrap
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


# Refusals and edge answers, by label: (API key, case).
REFUSALS: dict[str, tuple[int, Case]] = {
    **ERROR_CASES,
    **FETCH_CASES,
    **COORDINATOR_ERROR_CASES,
    **ADMIN_ERROR_CASES,
}


@dataclasses.dataclass(frozen=True)
class Live:
    """One live probe: a case (``label``: one of REFUSALS, or "" for CASES') at one
    version. Its text is its test id (compat_tests/outcomes.py shows parameters so)."""

    api_key: int
    version: int
    label: str = ""

    @property
    def id(self) -> str:
        return f"api{self.api_key}-v{self.version}" + (f"-{self.label}" if self.label else "")

    def __str__(self) -> str:
        return self.id


def refusal_versions(label: str, api_key: int) -> list[int]:
    """The lowest and highest version a refusal case is sent at: the API's, or from the
    case's first version (FIRST_VERSIONS) when that is later."""
    versions = [v for v in served_versions(api_key) if v >= FIRST_VERSIONS.get(label, 0)]
    return sorted({versions[0], versions[-1]})


# Every served version of the main cases; the lowest and highest of the refusals'.
LIVE = [Live(key, version) for key, version in SERVED] + [
    Live(key, version, label)
    for label, (key, _) in REFUSALS.items()
    for version in refusal_versions(label, key)
]
# Names made by one session's probes start with this (an already running Kafka may keep
# another session's); the differential test's case ids are the same on both brokers.
RUN = uuid.uuid4().hex[:8]
# Kafka starts in 5-30 s (kafka_sources.launched allows 120 s), then its coordinators load.
KAFKA_START_TIMEOUT_S = 180


def pair_id(pair: tuple[int, int]) -> str:
    return f"api{pair[0]}-v{pair[1]}"


# --------------------------------------------------------------------------------------
# Round trips through the codecs (no broker)
# --------------------------------------------------------------------------------------


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
    assert joined(walk_body(cls, wire)) == wire


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
# Live: every served version against a running kshim, and against Apache Kafka
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def kshim_probe() -> Iterator[Probe]:
    broker: BrokerUnderTest = start_kshim(KSHIM_SETTINGS)
    try:
        yield Probe(broker.host, broker.port)
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def kafka_probe() -> Iterator[Probe]:
    """A Kafka 3.9 with its coordinators up, one per session; skips when none can run."""
    reason = kafka_unavailable_reason()
    if reason is not None:
        pytest.skip(f"kafka: {reason}")
    with reference_kafka() as bootstrap:
        probe = Probe(*parse_bootstrap(bootstrap))
        probe.wait_for_coordinators()
        yield probe


@pytest.fixture(scope="session")
def kafka_ranges(kafka_probe: Probe) -> dict[int, tuple[int, int]]:
    """The version range of every API the Kafka serves, from its ApiVersions."""
    answer = kafka_probe.call(18, 0, {})
    return {int(api.api_key): (api.min_version, api.max_version) for api in answer.api_keys}


def case_for(live: Live) -> Case:
    if live.label:
        return REFUSALS[live.label][1]
    case = CASES.get(live.api_key)
    if case is None:
        pytest.fail(
            f"kshim advertises API {live.api_key} but compat_tests/test_protocol_conformance.py "
            "has no case for it: add one to CASES"
        )
    return case


@pytest.mark.wire
@pytest.mark.parametrize("live", LIVE, ids=lambda live: live.id)
def test_response_field_by_field(kshim_probe: Probe, live: Live) -> None:
    api_key, version = live.api_key, live.version
    case = case_for(live)
    kshim_probe.start_case(f"h{RUN}-{live.id}")
    exchange = case(kshim_probe, version)

    response = kshim_probe.call(api_key, version, exchange.request)

    expected = codec.build(
        codec.response_class(api_key, version), exchange.expect(response), any_version=True
    )
    mismatches = field_differences(response, expected)
    assert not mismatches, "; ".join(mismatches)
    assert response == expected


@pytest.mark.wire
@pytest.mark.timeout(KAFKA_START_TIMEOUT_S)  # the first one starts Kafka (kafka_probe)
@pytest.mark.parametrize("live", LIVE, ids=lambda live: live.id)
def test_kshim_answers_as_kafka(
    kshim_probe: Probe,
    kafka_probe: Probe,
    kafka_ranges: dict[int, tuple[int, int]],
    live: Live,
) -> None:
    api_key, version = live.api_key, live.version
    case = case_for(live)
    low, high = kafka_ranges.get(api_key, (0, -1))
    if not low <= version <= high:
        served = f"v{low}-v{high}" if low <= high else "none"
        pytest.skip(f"only kshim serves API {api_key} v{version} (Kafka: {served}): no comparison")
    case_id = f"d{RUN}-{live.id}"

    kshim_header, kshim = normalised_answer(kshim_probe, case, api_key, version, case_id)
    kafka_header, kafka = normalised_answer(kafka_probe, case, api_key, version, case_id)

    found = differences(kshim, kafka)
    if kshim_header != kafka_header:
        found.append(Difference("(response header)", kshim_header.hex(), kafka_header.hex()))
    left, stale = unexplained(api_key, version, found, live.label)
    assert not left, "differences from Kafka no allow-list entry explains:\n" + "\n".join(
        map(str, left)
    )
    assert not stale, f"allow-list entries that matched no difference: {stale}"
    if not found:  # byte for byte, once the normalised values are placeholders
        assert joined(kshim) == joined(kafka)


def normalised_answer(
    probe: Probe, case: Case, api_key: int, version: int, case_id: str
) -> tuple[bytes, Struct]:
    """The case's answer on ``probe``'s broker, decoded by kio (which must accept it): its
    response header's bytes (the correlation id, the same on both brokers' new
    connections, and in flexible versions the header's tagged fields), and its body as a
    byte-keeping tree with the values no two brokers share replaced (conformance_diff)."""
    probe.start_case(case_id)
    exchange = case(probe, version)
    frame = probe.call_frame(api_key, version, exchange.request)
    decode_response(api_key, version, frame)
    body = split_response(api_key, version, frame)[1]
    tree = walk_body(codec.response_class(api_key, version), body)
    normaliser = Normaliser(api_key, own_port=probe.port, own_names=probe.prefix)
    return frame[: len(frame) - len(body)], normaliser.struct(tree)


def field_differences(actual: Any, expected: Any, path: str = "response") -> list[str]:
    """Every field where ``actual`` differs from ``expected``, as 'path: actual != expected'."""
    if dataclasses.is_dataclass(expected) and type(actual) is type(expected):
        found = []
        for field in dataclasses.fields(expected):
            found += field_differences(
                getattr(actual, field.name), getattr(expected, field.name), f"{path}.{field.name}"
            )
        return found
    if isinstance(expected, tuple) and isinstance(actual, tuple) and len(actual) == len(expected):
        found = []
        for index, (got, wanted) in enumerate(zip(actual, expected, strict=True)):
            found += field_differences(got, wanted, f"{path}[{index}]")
        return found
    return [] if actual == expected else [f"{path}: {actual!r} != {expected!r}"]

"""Every request of every served API decodes and is answered at large sizes, over real sockets.

A frame larger than the receive staging buffer (16 KiB) is read in place into a buffer
of its own, and one larger than 1 MiB in parts joined at the end (framing.py); kio's
decoder once refused every frame read in place ("Received writable byte buffer where
read-only was expected") and the connection closed, so librdkafka's Metadata request
for 1,500 topics failed. Here each API's request, at the lowest and highest versions
that carry arrays (flexible and non-flexible encodings differ), is grown to 64 KiB and
exactly 1 MiB (one part), and at the highest version to 8 MiB (eight parts), and sent to
one real ``kshim serve``, which must answer every element (large_requests.py says what each
answer must be), and must still be the same process with a clean log at the end.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterator
from typing import Any

import pytest

from kshim.client.frames import MalformedResponseError
from kshim.client.wire import ConnectionClosedError, WireConnection, connect
from kshim.protocol import codec
from kshim.protocol.apis import ADVERTISED, served_range
from kshim.protocol.framing import PART_BYTES
from kshim.testing import BrokerProcess, failure_lines
from tests.bad_input_support import crash_report
from tests.server.large_requests import (
    CASES,
    KIB,
    MIB,
    SizedRequest,
    first_difference,
    sized_request,
)

pytestmark = pytest.mark.slow

SIZES = {"64KiB": 64 * KIB, "1MiB": PART_BYTES, "8MiB": 8 * MIB}
RESPONSE_TIMEOUT_S = 60.0
METADATA = 3
# What a crash or a failed task leaves in the log, beyond bad-input's markers; and since
# every request here is well-formed, any connection closed by the broker (an INFO line:
# dispatch.py counts a request kio cannot decode as the client's fault) is a failure too.


def has_array(cls: type[Any]) -> bool:
    """True when the kio dataclass ``cls`` holds an array anywhere, however deep."""
    hints = typing.get_type_hints(cls)
    return any(
        _type_has_array(hints[field.name])
        for field in dataclasses.fields(cls)
        if not field.name.startswith("__")
    )


def _type_has_array(hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if origin is tuple:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_type_has_array(arg) for arg in typing.get_args(hint))
    return dataclasses.is_dataclass(hint) and has_array(hint)  # type: ignore[arg-type]


def versions_with_arrays(api_key: int) -> list[int]:
    """The lowest and highest served versions of ``api_key`` whose request holds an array.

    Some APIs gain their only array in a later version (FindCoordinator's batched keys in
    v4, LeaveGroup's members in v3, ListGroups' filters in v4): for those the lowest such
    version stands in for the lowest served one.
    """
    low, high = served_range(api_key)
    found = [v for v in range(low, high + 1) if has_array(codec.request_class(api_key, v))]
    return sorted({found[0], found[-1]}) if found else []


def apis_with_arrays() -> list[int]:
    return [api_key for api_key in sorted(ADVERTISED) if versions_with_arrays(api_key)]


def api_name(api_key: int, version: int) -> str:
    return codec.request_class(api_key, version).__name__.removesuffix("Request")


# Eight parts are joined the same way whatever the API (framing.py): 8 MiB for the highest
# version of each API only, its handler then answering eight times the 1 MiB elements.
CASE_PARAMS = [
    pytest.param(api_key, version, size, id=f"{api_name(api_key, version)}-v{version}-{label}")
    for api_key in apis_with_arrays()
    for version in versions_with_arrays(api_key)
    for label, size in SIZES.items()
    if label != "8MiB" or version == versions_with_arrays(api_key)[-1]
]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for the module, so the last test can read a log of these requests only."""
    broker = BrokerProcess(tmp_path_factory.mktemp("large-requests") / "data").start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def first_pid(broker: BrokerProcess) -> int:
    assert broker.process is not None
    return broker.process.pid


def read_answer(
    broker: BrokerProcess, conn: WireConnection, api_key: int, version: int, correlation_id: int
) -> Any:
    """The decoded response; a closed connection, no answer or a malformed one fails the
    test with the broker's log, which says why it gave up on the request."""
    try:
        return conn.read_response(api_key, version, correlation_id)
    except (ConnectionClosedError, TimeoutError, MalformedResponseError) as error:
        pytest.fail(f"no answer: {error!r}\nbroker log:\n{crash_report(broker)}")


def assert_answered(
    broker: BrokerProcess, api_key: int, version: int, request: SizedRequest, response: Any
) -> None:
    """Asserts the response answers every element of the request as CASES says."""
    case = CASES[api_key]
    difference = first_difference(
        case.expected(version, request.count), case.answers(version, response)
    )
    assert not difference, f"{request.count} elements: {difference}\n{crash_report(broker)}"


def test_every_api_with_arrays_has_a_case() -> None:
    # A newly served API with an array must get a large-request case here too. Only
    # Heartbeat, ApiVersions, InitProducerId, AddOffsetsToTxn, EndTxn, SaslHandshake,
    # SaslAuthenticate and DescribeAcls have none.
    assert set(apis_with_arrays()) == set(CASES)
    assert set(ADVERTISED) - set(CASES) == {12, 17, 18, 22, 25, 26, 29, 36}


@pytest.mark.parametrize(("api_key", "version", "body_size"), CASE_PARAMS)
def test_large_request_is_answered(
    broker: BrokerProcess, first_pid: int, api_key: int, version: int, body_size: int
) -> None:
    request = sized_request(api_key, version, correlation_id=7, body_size=body_size)
    with connect(broker.bootstrap, RESPONSE_TIMEOUT_S) as conn:
        conn.send(request.frame)
        response = read_answer(broker, conn, api_key, version, correlation_id=7)
    assert_answered(broker, api_key, version, request, response)


@pytest.mark.parametrize("write_size", [1000, None], ids=["1000-byte-writes", "one-write"])
@pytest.mark.parametrize("body_size", [PART_BYTES, PART_BYTES + 1], ids=["one-part", "two-parts"])
def test_metadata_written_in_pieces_or_at_once(
    broker: BrokerProcess, first_pid: int, body_size: int, write_size: int | None
) -> None:
    # librdkafka's case (Metadata, flexible), read in place as one part or as two joined.
    request = sized_request(METADATA, 12, correlation_id=11, body_size=body_size)
    with connect(broker.bootstrap, RESPONSE_TIMEOUT_S) as conn:
        step = write_size or len(request.frame)
        for start in range(0, len(request.frame), step):
            conn.send(request.frame[start : start + step])  # no delay between writes
        response = read_answer(broker, conn, METADATA, 12, correlation_id=11)
    assert_answered(broker, METADATA, 12, request, response)


def test_pipelined_large_requests_answered_in_order(broker: BrokerProcess, first_pid: int) -> None:
    # Large frames back to back in one write: each ends exactly where the next begins,
    # across the in-place and joined-parts paths.
    sizes = [64 * KIB, PART_BYTES + 1, 16 * KIB, 2 * MIB]
    requests = [
        sized_request(METADATA, 12, correlation_id=100 + i, body_size=size)
        for i, size in enumerate(sizes)
    ]
    with connect(broker.bootstrap, RESPONSE_TIMEOUT_S) as conn:
        conn.send(b"".join(request.frame for request in requests))
        for i, request in enumerate(requests):
            response = read_answer(broker, conn, METADATA, 12, correlation_id=100 + i)
            assert_answered(broker, METADATA, 12, request, response)


def test_broker_survived_and_logged_no_errors(broker: BrokerProcess, first_pid: int) -> None:
    # Runs last (pytest keeps definition order): every request above reached this process.
    assert broker.is_running(), crash_report(broker)
    assert broker.process is not None
    assert broker.process.pid == first_pid, "the broker was restarted"
    log = broker.log_text()
    # No connection was closed either: every request here is one kshim must answer.
    problems = failure_lines(log, also=("closing connection",))
    assert not problems, "\n".join(problems)[:4000]

"""Every request of every served API decodes and is answered at large sizes, over real sockets.

A frame larger than the receive staging buffer (16 KiB) is read in place into a buffer
of its own, and one larger than 1 MiB in parts joined at the end (framing.py); kio's
decoder once refused every frame read in place ("Received writable byte buffer where
read-only was expected") and the connection closed, so librdkafka's Metadata request
for 1,500 topics failed. Here each API's request, at the lowest and highest versions
that carry arrays (flexible and non-flexible encodings differ), is grown to 64 KiB,
exactly 1 MiB (one part) and 8 MiB (eight parts) and sent to one real ``kshim serve``,
which must answer every element (large_requests.py says what each answer must be), and
must still be the same process with a clean log at the end.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from kshim.protocol.errors import ErrorCode
from kshim.protocol.framing import PART_BYTES
from kshim.testing import BrokerProcess
from tests.bad_input_support import CRASH_MARKERS, crash_report
from tests.raw_client import RawConnection
from tests.server.large_requests import (
    CASES,
    KIB,
    MIB,
    api_name,
    apis_with_arrays,
    first_difference,
    sized_request,
    unknown_topic,
    versions_with_arrays,
)

pytestmark = pytest.mark.slow

SIZES = {"64KiB": 64 * KIB, "1MiB": PART_BYTES, "8MiB": 8 * MIB}
RESPONSE_TIMEOUT_S = 60.0
METADATA = 3
# What a crash or a failed task leaves in the log, beyond bad-input's markers.
LOG_MARKERS = (*CRASH_MARKERS, "Task exception was never retrieved")
ERROR_LINE = re.compile(r"^.* (?:ERROR|CRITICAL) .*$", re.MULTILINE)

CASE_PARAMS = [
    pytest.param(api_key, version, size, id=f"{api_name(api_key, version)}-v{version}-{label}")
    for api_key in apis_with_arrays()
    for version in versions_with_arrays(api_key)
    for label, size in SIZES.items()
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


def test_every_api_with_arrays_has_a_case() -> None:
    # A newly served API with an array must get a large-request case here too.
    assert set(apis_with_arrays()) == set(CASES)


@pytest.mark.parametrize(("api_key", "version", "body_size"), CASE_PARAMS)
def test_large_request_is_answered(
    broker: BrokerProcess, first_pid: int, api_key: int, version: int, body_size: int
) -> None:
    request = sized_request(api_key, version, correlation_id=7, body_size=body_size)
    with RawConnection(broker.port, timeout_s=RESPONSE_TIMEOUT_S) as conn:
        conn.send(request.frame)
        response = conn.read_response(api_key, version, correlation_id=7)
    case = CASES[api_key]
    difference = first_difference(
        case.expected(version, request.count), case.answers(version, response)
    )
    assert not difference, f"{request.count} elements: {difference}\n{crash_report(broker)}"


@pytest.mark.parametrize("write_size", [1000, None], ids=["1000-byte-writes", "one-write"])
def test_metadata_written_in_pieces_or_at_once(
    broker: BrokerProcess, first_pid: int, write_size: int | None
) -> None:
    # librdkafka's case: Metadata, flexible, just over one part (two parts joined).
    request = sized_request(METADATA, 12, correlation_id=11, body_size=PART_BYTES + 1)
    with RawConnection(broker.port, timeout_s=RESPONSE_TIMEOUT_S) as conn:
        step = write_size or len(request.frame)
        for start in range(0, len(request.frame), step):
            conn.send(request.frame[start : start + step])  # no delay between writes
        response = conn.read_response(METADATA, 12, correlation_id=11)
    assert len(response.topics) == request.count
    assert response.topics[-1].name == unknown_topic(request.count - 1)
    assert {t.error_code for t in response.topics} == {ErrorCode.unknown_topic_or_partition}


def test_pipelined_large_requests_answered_in_order(broker: BrokerProcess, first_pid: int) -> None:
    # Large frames back to back in one write: each ends exactly where the next begins,
    # across the in-place and joined-parts paths.
    sizes = [64 * KIB, PART_BYTES + 1, 16 * KIB, 2 * MIB]
    requests = [
        sized_request(METADATA, 12, correlation_id=100 + i, body_size=size)
        for i, size in enumerate(sizes)
    ]
    with RawConnection(broker.port, timeout_s=RESPONSE_TIMEOUT_S) as conn:
        conn.send(b"".join(request.frame for request in requests))
        for i, request in enumerate(requests):
            response = conn.read_response(METADATA, 12, correlation_id=100 + i)
            assert len(response.topics) == request.count


def test_broker_survived_and_logged_no_errors(broker: BrokerProcess, first_pid: int) -> None:
    # Runs last (pytest keeps definition order): every request above reached this process.
    assert broker.is_running(), crash_report(broker)
    assert broker.process is not None
    assert broker.process.pid == first_pid, "the broker was restarted"
    log = broker.log_text()
    assert not any(marker in log for marker in LOG_MARKERS), crash_report(broker)
    assert not ERROR_LINE.findall(log), "\n".join(ERROR_LINE.findall(log))[:4000]

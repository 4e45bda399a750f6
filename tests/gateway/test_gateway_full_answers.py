"""The gateway's own answers to reads of ``T.full`` (kshim/gateway/full/answers.py), in
every version a client may use, over an index holding two records of partition 0
(the index itself is tested against Kafka in test_gateway_full_index.py)."""

from __future__ import annotations

import asyncio
import time

import pytest

from kshim.broker.full_view.reader import ViewRead
from kshim.broker.partition_reads import PartitionOffsets
from kshim.client.frames import decode_response, encode_request
from kshim.gateway.full import answers
from kshim.gateway.full.requests import decoded
from kshim.protocol.records import Record, build_batch

FETCH, LIST_OFFSETS, EPOCHS = 1, 2, 23
BATCHES = (build_batch([Record(3, 1_000, b"k", b"v", ())]),)


class _Index:
    """Partition 0 of ``T`` owned and ready, high watermark 5; partition 1 not owned."""

    def __init__(self) -> None:
        self.grown = asyncio.Event()

    def owns(self, topic: str, partition: int) -> bool:
        return topic == "t" and partition == 0

    def ready(self, topic: str, partition: int) -> bool:
        return True

    def offsets(self, topic: str, partition: int) -> PartitionOffsets:
        return PartitionOffsets(1, 5, 5)

    async def read(self, topic: str, partition: int, offset: int, max_bytes: int) -> ViewRead:
        if offset > 5:
            return ViewRead(self.offsets(topic, partition), (), out_of_range=True)
        return ViewRead(self.offsets(topic, partition), BATCHES if offset < 5 else ())

    async def wait_beyond(self, topic: str, partition: int, offset: int, timeout_s: float) -> None:
        await asyncio.wait_for(self.grown.wait(), timeout_s)

    async def offset_for_timestamp(
        self, topic: str, partition: int, timestamp: int | None
    ) -> tuple[int, int] | None:
        return (3, 1_000) if timestamp is None or timestamp <= 1_000 else None


async def _answered(
    api_key: int, version: int, fields: dict[str, object], index: _Index | None = None
) -> object:
    payload = encode_request(api_key, version, 11, fields)[4:]
    api, asked_version, correlation_id, request = decoded(payload)
    answer = await answers.answer(api, asked_version, correlation_id, request, index or _Index())
    correlation, decoded_answer = decode_response(api_key, version, answer)
    assert correlation == 11
    return decoded_answer


def _fetch_fields(offset: int, max_wait_ms: int) -> dict[str, object]:
    partitions = [{"partition": p, "fetch_offset": offset, "partition_max_bytes": 1 << 20}
                  for p in (0, 1)]  # fmt: skip
    return {"replica_id": -1, "max_wait": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 1, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": "t.full", "partitions": partitions}],
            "forgotten_topics_data": [], "rack_id": ""}  # fmt: skip


@pytest.mark.parametrize("version", [4, 7, 11, 12])
async def test_a_fetch_gets_the_views_batches_and_not_leader_for_a_partition_owned_elsewhere(
    version: int,
) -> None:
    answer = await _answered(FETCH, version, _fetch_fields(0, 0))
    owned, elsewhere = answer.responses[0].partitions  # type: ignore[attr-defined]
    assert (owned.error_code, owned.high_watermark) == (0, 5)
    assert getattr(owned, "log_start_offset", 1) == 1  # from v5
    assert bytes(owned.records) == BATCHES[0]
    assert elsewhere.error_code == 6  # NOT_LEADER_OR_FOLLOWER: clients ask for metadata
    past = await _answered(FETCH, version, _fetch_fields(9, 0))
    assert past.responses[0].partitions[0].error_code == 1  # type: ignore[attr-defined]


async def test_a_fetch_at_the_end_waits_up_to_its_max_wait() -> None:
    started = time.monotonic()
    answer = await _answered(FETCH, 12, _fetch_fields(5, 300))
    assert time.monotonic() - started >= 0.25
    assert not answer.responses[0].partitions[0].records  # type: ignore[attr-defined]


class _Building(_Index):
    """Partition 0 owned, its view being built (after a takeover) until ``built``."""

    def __init__(self) -> None:
        super().__init__()
        self.built = False

    def ready(self, topic: str, partition: int) -> bool:
        return self.built

    async def read(self, topic: str, partition: int, offset: int, max_bytes: int) -> ViewRead:
        assert self.built, "a view read while it is being built"
        return await super().read(topic, partition, offset, max_bytes)


async def test_a_fetch_of_a_view_being_built_is_sent_away_or_waits_for_it() -> None:
    building = _Building()
    answer = await _answered(FETCH, 12, _fetch_fields(0, 100), building)
    assert answer.responses[0].partitions[0].error_code == 6  # type: ignore[attr-defined]
    asyncio.get_running_loop().call_later(0.1, setattr, building, "built", True)
    answer = await _answered(FETCH, 12, _fetch_fields(0, 2_000), building)
    owned = answer.responses[0].partitions[0]  # type: ignore[attr-defined]
    assert (owned.error_code, bytes(owned.records)) == (0, BATCHES[0])


@pytest.mark.parametrize("version", [1, 2, 4, 6, 7, 8])
async def test_list_offsets_earliest_latest_and_by_time(version: int) -> None:
    found = []
    for timestamp in (-2, -1, 500, 5_000):
        partitions = [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}]
        fields = {"replica_id": -1, "isolation_level": 1,
                  "topics": [{"name": "t.full", "partitions": partitions}]}  # fmt: skip
        answer = await _answered(LIST_OFFSETS, version, fields)
        partition = answer.topics[0].partitions[0]  # type: ignore[attr-defined]
        found.append((partition.error_code, partition.offset))
    assert found == [(0, 1), (0, 5), (0, 3), (0, -1)]


@pytest.mark.parametrize("version", [2, 3, 4])
async def test_offset_for_leader_epoch_is_the_views_end(version: int) -> None:
    partitions = [{"partition": p, "current_leader_epoch": -1, "leader_epoch": 0} for p in (0, 1)]
    fields = {"replica_id": -1, "topics": [{"topic": "t.full", "partitions": partitions}]}
    answer = await _answered(EPOCHS, version, fields)
    owned, elsewhere = answer.topics[0].partitions  # type: ignore[attr-defined]
    assert (owned.error_code, owned.end_offset) == (0, 5)
    assert elsewhere.error_code == 6

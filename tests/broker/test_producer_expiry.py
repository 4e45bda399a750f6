"""producer.id.expiration.ms: silent producers are forgotten, open transactions are kept."""

from __future__ import annotations

from kshim.broker.producer_state import PartitionProducerState
from kshim.protocol.record_batch import BatchHeader, read_header
from kshim.protocol.records import BatchSpec, Record, build_batch


def _header(producer_id: int, timestamp: int, transactional: bool = False) -> BatchHeader:
    spec = BatchSpec(attributes=0x10 if transactional else 0, producer_id=producer_id,
                     producer_epoch=0, base_sequence=0)  # fmt: skip
    return read_header(build_batch([Record(0, timestamp, b"k", b"v")], spec))


def test_expire_forgets_only_silent_producers_outside_open_transactions() -> None:
    state = PartitionProducerState()
    for producer_id, timestamp in ((1, 1_000), (2, 5_000), (3, 1_000)):
        header = _header(producer_id, timestamp)
        state.record(header, 0)
    assert state.expire(cutoff_ms=2_000, keep={3}) == 1
    assert sorted(state.producers) == [2, 3]
    # A forgotten producer is unknown again: any sequence is accepted.
    assert state.check(_header(1, 9_000)) is None

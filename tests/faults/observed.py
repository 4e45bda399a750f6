"""Partitions read back into history.Stored records, for the checkers."""

from __future__ import annotations

from collections.abc import Mapping

from kshim.broker.transactions.markers import COMMIT, marker_type
from kshim.protocol.record_batch import iter_batches
from kshim.protocol.records import decode_records
from kshim.storage.interface import PartitionLog, TopicPartition
from tests.faults.history import Observed, Stored
from tests.storage.support import read_everything


def stored_records(data: bytes) -> list[Stored]:
    """Every record of ``data`` (whole batches), markers as such."""
    found = []
    for position, header in iter_batches(data):
        _, records = decode_records(data[position : position + header.size])
        for record in records:
            marker = None
            if header.is_control:
                marker = "commit" if marker_type(record.key) == COMMIT else "abort"
            found.append(
                Stored(
                    record.offset,
                    None if marker or record.value is None else record.value.decode(),
                    None if marker or record.key is None else record.key.decode(),
                    header.producer_id,
                    header.is_transactional,
                    marker,
                )
            )
    return found


async def read_observed(logs: Mapping[TopicPartition, PartitionLog]) -> Observed:
    return {
        f"{partition.topic}-{partition.partition}": stored_records(await read_everything(log))
        for partition, log in logs.items()
    }

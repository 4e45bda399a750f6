"""What ``kshim transactions`` describes: a producer as a partition's leader knows it
(DescribeProducers v0, decoded by kio), and a transactional id as its coordinator knows it
(DescribeTransactions v0), decoded here rather than by kio: a transactional id that has no
transaction under way (Empty) has the start time -1, which kio's timestamp type refuses.
(KIP-664; https://kafka.apache.org/protocol#The_Messages_DescribeTransactions.)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kio.schema.describe_producers.v0 import response as describe_producers

from kshim.protocol.primitives import DecodeError, read_tagged_fields, read_unsigned_varint

INT16, INT32, INT64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class ProducerState:
    """One producer a partition's leader knows (DescribeProducers)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int  # the max timestamp of its last batch, epoch ms
    coordinator_epoch: int  # -1: none known
    transaction_start_offset: int  # -1: no transaction of its open here


def producer_state(state: describe_producers.ProducerState) -> ProducerState:
    """One producer of a DescribeProducers v0 answer."""
    return ProducerState(
        producer_id=int(state.producer_id),
        producer_epoch=int(state.producer_epoch),
        last_sequence=int(state.last_sequence),
        last_timestamp=int(state.last_timestamp),
        coordinator_epoch=int(state.coordinator_epoch),
        transaction_start_offset=int(state.current_txn_start_offset),
    )


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    """A transactional id as its coordinator describes it."""

    coordinator: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    start_time_ms: int | None  # None: no transaction under way since the producer started
    partitions: tuple[tuple[str, int], ...]  # (topic, partition), as the coordinator lists


def describe_transactions_response(
    payload: bytes, coordinator: int
) -> list[tuple[int, TransactionDescription]]:
    """(error code, description) of each transactional id in a DescribeTransactions v0
    response body, a flexible version (compact strings and arrays, tagged fields)::

        throttle_time_ms int32, transaction_states [error_code int16,
        transactional_id string, transaction_state string, transaction_timeout_ms int32,
        transaction_start_time_ms int64, producer_id int64, producer_epoch int16,
        topics [topic string, partitions [int32]]]
    """
    reader = _CompactReader(payload)
    reader.fixed(INT32)  # throttle_time_ms
    states = []
    for _ in range(reader.array_length()):
        error_code = reader.fixed(INT16)
        transactional_id = reader.string()
        state = reader.string()
        timeout_ms = reader.fixed(INT32)
        start_time_ms = reader.fixed(INT64)
        producer_id = reader.fixed(INT64)
        producer_epoch = reader.fixed(INT16)
        partitions = []
        for _ in range(reader.array_length()):
            topic = reader.string()
            partitions += [(topic, reader.fixed(INT32)) for _ in range(reader.array_length())]
            reader.tagged_fields()
        reader.tagged_fields()
        description = TransactionDescription(
            coordinator=coordinator,
            transactional_id=transactional_id,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            state=state,
            timeout_ms=timeout_ms,
            start_time_ms=None if start_time_ms < 0 else start_time_ms,
            partitions=tuple(partitions),
        )
        states.append((error_code, description))
    reader.tagged_fields()
    reader.at_end()
    return states


class _CompactReader:
    """Reads a flexible-version body front to back; raises DecodeError or struct.error."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._position = 0

    def fixed(self, kind: struct.Struct) -> int:
        (value,) = kind.unpack_from(self._data, self._position)
        self._position += kind.size
        return int(value)

    def array_length(self) -> int:
        """A compact array's length (stored plus one); a null array reads as empty."""
        stored, self._position = read_unsigned_varint(self._data, self._position)
        return max(stored - 1, 0)

    def string(self) -> str:
        stored, self._position = read_unsigned_varint(self._data, self._position)
        if stored == 0:
            raise DecodeError("null in a non-nullable string")
        end = self._position + stored - 1
        if end > len(self._data):
            raise DecodeError("string runs past the end of the response")
        text = self._data[self._position : end].decode("utf-8")
        self._position = end
        return text

    def tagged_fields(self) -> None:
        self._position = read_tagged_fields(self._data, self._position)

    def at_end(self) -> None:
        if self._position != len(self._data):
            raise DecodeError(f"{len(self._data) - self._position} bytes left over")

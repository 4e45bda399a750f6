"""ListOffsets of one topic's partitions, as ``kshim groups reset-offsets`` (read_uncommitted,
as Kafka's admin tools read the high watermark) and ``kshim tail`` (read_committed, up to
the last stable offset, KIP-98) ask it, with its special timestamps."""

from __future__ import annotations

from collections.abc import Sequence

from kio.schema.list_offsets.v5.response import ListOffsetsResponse

from kshim.client.errors import check_answer
from kshim.client.request_versions import LIST_OFFSETS
from kshim.client.wire import WireConnection

# ListOffsets' special timestamps (ListOffsetsRequest.EARLIEST_TIMESTAMP, LATEST_TIMESTAMP),
# and its answer when no record has a timestamp at or after the one asked for.
EARLIEST, LATEST = -2, -1
UNKNOWN_OFFSET = -1
READ_UNCOMMITTED, READ_COMMITTED = 0, 1  # isolation levels (KIP-98)
CONSUMER_REPLICA_ID = -1  # a consumer's, not a follower's, request
NO_LEADER_EPOCH = -1


def list_offsets(
    connection: WireConnection,
    error: type[Exception],
    topic: str,
    partitions: Sequence[int],
    timestamp: int,
    isolation_level: int,
) -> dict[int, int]:
    """The offset ListOffsets answers for each partition: EARLIEST (the log start), LATEST
    (the high watermark, or the last stable offset for read_committed) or the first offset
    whose timestamp is at or after ``timestamp`` (UNKNOWN_OFFSET when there is none).
    Raises ``error`` for a partition answered with an error code."""
    wanted = [
        {"partition_index": index, "current_leader_epoch": NO_LEADER_EPOCH, "timestamp": timestamp}
        for index in partitions
    ]
    request = {
        "replica_id": CONSUMER_REPLICA_ID,
        "isolation_level": isolation_level,
        "topics": [{"name": topic, "partitions": wanted}],
    }
    api_key, version = LIST_OFFSETS
    response = connection.call_for(ListOffsetsResponse, api_key, version, request)
    offsets = {}
    for answered in response.topics:
        for partition in answered.partitions:
            index = int(partition.partition_index)
            check_answer(error, partition.error_code, f"cannot list offsets of {topic}-{index}")
            offsets[index] = int(partition.offset)
    return offsets

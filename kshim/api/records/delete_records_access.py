"""The access rule of DeleteRecords (KafkaApis.handleDeleteRecordsRequest), loaded with its
route at its first request (api/routes.py): each topic needs DELETE."""

from __future__ import annotations

from kshim.api.access.refusals import Listing, item_by_item, partition_by_partition, topics_need
from kshim.api.records.delete_records import NO_LOW_WATERMARK
from kshim.protocol.acls import Operation
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.delete_records import (
    DeleteRecordsPartitionResult,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)


def _refused_deletion(
    *, partition_index: int, error_code: ErrorCode
) -> DeleteRecordsPartitionResult:
    return DeleteRecordsPartitionResult(
        partition_index=partition_index, low_watermark=NO_LOW_WATERMARK, error_code=error_code
    )


# Each topic needs DELETE, or its partitions are TOPIC_AUTHORIZATION_FAILED.
delete_records_rule = item_by_item(
    Listing(DeleteRecordsRequest, "topics", DeleteRecordsResponse, "topics"),
    topics_need(Operation.DELETE),
    partition_by_partition(DeleteRecordsTopicResult, _refused_deletion),
)

"""The one table from API key to handler: which typed request each handler takes.

A route binds an API's typed request class (``protocol/messages/``, or the class of a
hand-written decoder: Produce's, which leaves record batches in the frame, and Metadata's,
which keeps topic names as strings) to its handler, so mypy checks that the handler takes
exactly that class. Handlers return their typed response, encoded body parts (Fetch,
Produce, Metadata and the cached ApiVersions answers), or None when no answer is due
(Produce with acks=0).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from kshim.broker.access.guard import guarded
from kshim.broker.context import RequestContext
from kshim.broker.handlers import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_configs,
    alter_user_scram_credentials,
    api_versions,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_topics,
    describe_acls,
    describe_configs,
    describe_groups,
    describe_producers,
    describe_transactions,
    describe_user_scram_credentials,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    produce,
    sasl_authenticate,
    sasl_handshake,
    sync_group,
    txn_offset_commit,
)
from kshim.protocol.apis import ADVERTISED
from kshim.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from kshim.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from kshim.protocol.messages.alter_configs import AlterConfigsRequest
from kshim.protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
)
from kshim.protocol.messages.api_versions import ApiVersionsRequest
from kshim.protocol.messages.create_acls import CreateAclsRequest
from kshim.protocol.messages.create_partitions import CreatePartitionsRequest
from kshim.protocol.messages.create_topics import CreateTopicsRequest
from kshim.protocol.messages.delete_acls import DeleteAclsRequest
from kshim.protocol.messages.delete_groups import DeleteGroupsRequest
from kshim.protocol.messages.delete_records import DeleteRecordsRequest
from kshim.protocol.messages.delete_topics import DeleteTopicsRequest
from kshim.protocol.messages.describe_acls import DescribeAclsRequest
from kshim.protocol.messages.describe_configs import DescribeConfigsRequest
from kshim.protocol.messages.describe_groups import DescribeGroupsRequest
from kshim.protocol.messages.describe_producers import DescribeProducersRequest
from kshim.protocol.messages.describe_transactions import DescribeTransactionsRequest
from kshim.protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
)
from kshim.protocol.messages.end_txn import EndTxnRequest
from kshim.protocol.messages.fetch import FetchRequest
from kshim.protocol.messages.find_coordinator import FindCoordinatorRequest
from kshim.protocol.messages.heartbeat import HeartbeatRequest
from kshim.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from kshim.protocol.messages.init_producer_id import InitProducerIdRequest
from kshim.protocol.messages.join_group import JoinGroupRequest
from kshim.protocol.messages.leave_group import LeaveGroupRequest
from kshim.protocol.messages.list_groups import ListGroupsRequest
from kshim.protocol.messages.list_offsets import ListOffsetsRequest
from kshim.protocol.messages.list_transactions import ListTransactionsRequest
from kshim.protocol.messages.offset_commit import OffsetCommitRequest
from kshim.protocol.messages.offset_delete import OffsetDeleteRequest
from kshim.protocol.messages.offset_fetch import OffsetFetchRequest
from kshim.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from kshim.protocol.messages.sasl_handshake import SaslHandshakeRequest
from kshim.protocol.messages.sync_group import SyncGroupRequest
from kshim.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from kshim.protocol.metadata_request import MetadataRequest, decode_metadata_request
from kshim.protocol.produce_request import ProduceRequest, decode_produce_request

RequestT = TypeVar("RequestT")
# version, frame, body offset -> request; raises DecodeError
Decoder = Callable[[int, bytes | bytearray, int], RequestT]


@dataclass(frozen=True, slots=True)
class Route(Generic[RequestT]):
    request_type: type[RequestT]
    handle: Callable[[RequestT, RequestContext], Awaitable[object]]
    decode: Decoder[RequestT] | None = None  # None: kio's decoder into ``request_type``


ROUTES: dict[int, Route[Any]] = {
    0: Route(ProduceRequest, produce.handle, decode_produce_request),
    1: Route(FetchRequest, fetch.handle),
    2: Route(ListOffsetsRequest, list_offsets.handle),
    3: Route(MetadataRequest, metadata.handle, decode_metadata_request),
    8: Route(OffsetCommitRequest, offset_commit.handle),
    9: Route(OffsetFetchRequest, offset_fetch.handle),
    10: Route(FindCoordinatorRequest, find_coordinator.handle),
    11: Route(JoinGroupRequest, join_group.handle),
    12: Route(HeartbeatRequest, heartbeat.handle),
    13: Route(LeaveGroupRequest, leave_group.handle),
    14: Route(SyncGroupRequest, sync_group.handle),
    15: Route(DescribeGroupsRequest, describe_groups.handle),
    16: Route(ListGroupsRequest, list_groups.handle),
    18: Route(ApiVersionsRequest, api_versions.handle),
    19: Route(CreateTopicsRequest, create_topics.handle),
    20: Route(DeleteTopicsRequest, delete_topics.handle),
    21: Route(DeleteRecordsRequest, delete_records.handle),
    22: Route(InitProducerIdRequest, init_producer_id.handle),
    32: Route(DescribeConfigsRequest, describe_configs.handle),
    33: Route(AlterConfigsRequest, alter_configs.handle),
    37: Route(CreatePartitionsRequest, create_partitions.handle),
    42: Route(DeleteGroupsRequest, delete_groups.handle),
    44: Route(IncrementalAlterConfigsRequest, incremental_alter_configs.handle),
    24: Route(AddPartitionsToTxnRequest, add_partitions_to_txn.handle),
    25: Route(AddOffsetsToTxnRequest, add_offsets_to_txn.handle),
    26: Route(EndTxnRequest, end_txn.handle),
    28: Route(TxnOffsetCommitRequest, txn_offset_commit.handle),
    61: Route(DescribeProducersRequest, describe_producers.handle),
    65: Route(DescribeTransactionsRequest, describe_transactions.handle),
    66: Route(ListTransactionsRequest, list_transactions.handle),
    47: Route(OffsetDeleteRequest, offset_delete.handle),
    17: Route(SaslHandshakeRequest, sasl_handshake.handle),
    36: Route(SaslAuthenticateRequest, sasl_authenticate.handle),
    29: Route(DescribeAclsRequest, describe_acls.handle),
    30: Route(CreateAclsRequest, create_acls.handle),
    31: Route(DeleteAclsRequest, delete_acls.handle),
    50: Route(DescribeUserScramCredentialsRequest, describe_user_scram_credentials.handle),
    51: Route(AlterUserScramCredentialsRequest, alter_user_scram_credentials.handle),
}

assert ROUTES.keys() == ADVERTISED.keys(), "every advertised API needs a handler"

# Every handler runs behind its API's ACL check, as Kafka's (access/table.py).
ROUTES = {
    key: dataclasses.replace(route, handle=guarded(key, route.handle))
    for key, route in ROUTES.items()
}

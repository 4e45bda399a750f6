"""The one table from API key to request type, handler and access rule, by API key.

A route binds an API's typed request class (``protocol/messages/``, or the class of a
hand-written decoder: Produce's, which leaves record batches in the frame, and Metadata's,
which keeps topic names as strings) to its handler, so mypy checks that the handler takes
exactly that class, and to the access rule that runs in front of it (``access/guard.py``),
as Kafka's KafkaApis authorises each request before handling it. A rule of None marks an
API every client may call: ApiVersions, and the SASL APIs that establish the principal
(Kafka authorises neither: KafkaApis, SaslServerAuthenticator). Handlers return their
typed response, encoded body parts (Fetch, Produce, Metadata and the cached ApiVersions
answers), or None when no answer is due (Produce with acks=0).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from kshim.api import api_versions
from kshim.api.access.guard import guarded
from kshim.api.access.rule import Check, Handler, ResponseT
from kshim.api.admin import (
    alter_configs,
    config_access,
    create_partitions,
    create_topics,
    delete_topics,
    describe_configs,
    describe_producers,
    incremental_alter_configs,
    topic_access,
)
from kshim.api.context import RequestContext
from kshim.api.groups import access as group_access
from kshim.api.groups import (
    delete_groups,
    describe_groups,
    find_coordinator,
    heartbeat,
    join_group,
    leave_group,
    list_groups,
    offset_access,
    offset_commit,
    offset_delete,
    offset_fetch,
    sync_group,
)
from kshim.api.records import access as record_access
from kshim.api.records import delete_records, fetch, list_offsets, metadata, produce
from kshim.api.security import access as security_access
from kshim.api.security import (
    alter_user_scram_credentials,
    create_acls,
    delete_acls,
    describe_acls,
    describe_user_scram_credentials,
    sasl_authenticate,
    sasl_handshake,
)
from kshim.api.transactions import access as transaction_access
from kshim.api.transactions import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    describe_transactions,
    end_txn,
    init_producer_id,
    list_transactions,
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
    """An API's route: ``handle`` is its handler behind its access rule ``check``."""

    request_type: type[RequestT]
    handle: Callable[[RequestT, RequestContext], Awaitable[object]]
    decode: Decoder[RequestT] | None = None  # None: kio's decoder into ``request_type``
    checked: bool = False  # False: every client may call the API


def route(
    request_type: type[RequestT],
    handle: Handler[RequestT, ResponseT],
    check: Check[RequestT, ResponseT] | None,
    decode: Decoder[RequestT] | None = None,
) -> Route[RequestT]:
    """The route running ``handle`` behind ``check`` (access/guard.py)."""
    guarded_handle: Handler[RequestT, ResponseT] = guarded(handle, check)
    return Route(request_type, guarded_handle, decode, check is not None)


ROUTES: dict[int, Route[Any]] = {
    0: route(ProduceRequest, produce.handle, record_access.produce_rule, decode_produce_request),
    1: route(FetchRequest, fetch.handle, record_access.fetch_rule),
    2: route(ListOffsetsRequest, list_offsets.handle, record_access.list_offsets_rule),
    3: route(
        MetadataRequest, metadata.handle, record_access.metadata_rule, decode_metadata_request
    ),
    8: route(OffsetCommitRequest, offset_commit.handle, group_access.offset_commit_rule),
    9: route(OffsetFetchRequest, offset_fetch.handle, offset_access.offset_fetch_rule),
    10: route(FindCoordinatorRequest, find_coordinator.handle, group_access.find_coordinator_rule),
    11: route(JoinGroupRequest, join_group.handle, group_access.join_group_rule),
    12: route(HeartbeatRequest, heartbeat.handle, group_access.heartbeat_rule),
    13: route(LeaveGroupRequest, leave_group.handle, group_access.leave_group_rule),
    14: route(SyncGroupRequest, sync_group.handle, group_access.sync_group_rule),
    15: route(DescribeGroupsRequest, describe_groups.handle, group_access.describe_groups_rule),
    16: route(ListGroupsRequest, list_groups.handle, group_access.list_groups_rule),
    17: route(SaslHandshakeRequest, sasl_handshake.handle, None),
    18: route(ApiVersionsRequest, api_versions.handle, None),
    19: route(CreateTopicsRequest, create_topics.handle, topic_access.create_topics_rule),
    20: route(DeleteTopicsRequest, delete_topics.handle, topic_access.delete_topics_rule),
    21: route(DeleteRecordsRequest, delete_records.handle, record_access.delete_records_rule),
    22: route(
        InitProducerIdRequest, init_producer_id.handle, transaction_access.init_producer_id_rule
    ),
    24: route(
        AddPartitionsToTxnRequest,
        add_partitions_to_txn.handle,
        transaction_access.add_partitions_to_txn_rule,
    ),
    25: route(
        AddOffsetsToTxnRequest,
        add_offsets_to_txn.handle,
        transaction_access.add_offsets_to_txn_rule,
    ),
    26: route(EndTxnRequest, end_txn.handle, transaction_access.end_txn_rule),
    28: route(
        TxnOffsetCommitRequest, txn_offset_commit.handle, transaction_access.txn_offset_commit_rule
    ),
    29: route(DescribeAclsRequest, describe_acls.handle, security_access.describe_acls_rule),
    30: route(CreateAclsRequest, create_acls.handle, security_access.create_acls_rule),
    31: route(DeleteAclsRequest, delete_acls.handle, security_access.delete_acls_rule),
    32: route(DescribeConfigsRequest, describe_configs.handle, config_access.describe_configs_rule),
    33: route(AlterConfigsRequest, alter_configs.handle, config_access.alter_configs_rule),
    36: route(SaslAuthenticateRequest, sasl_authenticate.handle, None),
    37: route(
        CreatePartitionsRequest, create_partitions.handle, topic_access.create_partitions_rule
    ),
    42: route(DeleteGroupsRequest, delete_groups.handle, group_access.delete_groups_rule),
    44: route(
        IncrementalAlterConfigsRequest,
        incremental_alter_configs.handle,
        config_access.incremental_alter_configs_rule,
    ),
    47: route(OffsetDeleteRequest, offset_delete.handle, group_access.offset_delete_rule),
    50: route(
        DescribeUserScramCredentialsRequest,
        describe_user_scram_credentials.handle,
        security_access.describe_user_scram_credentials_rule,
    ),
    51: route(
        AlterUserScramCredentialsRequest,
        alter_user_scram_credentials.handle,
        security_access.alter_user_scram_credentials_rule,
    ),
    61: route(
        DescribeProducersRequest, describe_producers.handle, topic_access.describe_producers_rule
    ),
    65: route(
        DescribeTransactionsRequest,
        describe_transactions.handle,
        transaction_access.describe_transactions_rule,
    ),
    66: route(
        ListTransactionsRequest,
        list_transactions.handle,
        transaction_access.list_transactions_rule,
    ),
}

assert ROUTES.keys() == ADVERTISED.keys(), "every advertised API needs a handler"

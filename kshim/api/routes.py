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

APIs that clients use day to day are routed from the start. Those of administration and
SASL (``LAZY_ROUTES``) are routed at their first request: each has a loader here that imports
its handler, request class and access rule then, so a broker nobody administers pays nothing
for them (about 1 MB and 20 ms of a fresh start, measured 2026-11-29). mypy checks a loader's
route as it checks the others: request class, handler and rule must agree. Such an import
reads the disk mid-run and can fail as any import can (no descriptor left); the request then
fails as a bug of the broker's would, and the next one tries again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from kshim.api import api_versions
from kshim.api.access.guard import guarded
from kshim.api.access.rule import Check, Handler, ResponseT
from kshim.api.admin import create_topics, topic_access
from kshim.api.context import RequestContext
from kshim.api.groups import access as group_access
from kshim.api.groups import (
    find_coordinator,
    heartbeat,
    join_group,
    leave_group,
    offset_access,
    offset_commit,
    offset_fetch,
    sync_group,
)
from kshim.api.records import access as record_access
from kshim.api.records import fetch, list_offsets, metadata, produce
from kshim.api.transactions import access as transaction_access
from kshim.api.transactions import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    end_txn,
    init_producer_id,
    txn_offset_commit,
)
from kshim.protocol.apis import ADVERTISED
from kshim.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from kshim.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from kshim.protocol.messages.api_versions import ApiVersionsRequest
from kshim.protocol.messages.create_topics import CreateTopicsRequest
from kshim.protocol.messages.end_txn import EndTxnRequest
from kshim.protocol.messages.fetch import FetchRequest
from kshim.protocol.messages.find_coordinator import FindCoordinatorRequest
from kshim.protocol.messages.heartbeat import HeartbeatRequest
from kshim.protocol.messages.init_producer_id import InitProducerIdRequest
from kshim.protocol.messages.join_group import JoinGroupRequest
from kshim.protocol.messages.leave_group import LeaveGroupRequest
from kshim.protocol.messages.list_offsets import ListOffsetsRequest
from kshim.protocol.messages.offset_commit import OffsetCommitRequest
from kshim.protocol.messages.offset_fetch import OffsetFetchRequest
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


# A route of whichever request type: the table's entries, each checked where it is made.
AnyRoute = Route[Any]


def route(
    request_type: type[RequestT],
    handle: Handler[RequestT, ResponseT],
    check: Check[RequestT, ResponseT] | None,
    decode: Decoder[RequestT] | None = None,
) -> Route[RequestT]:
    """The route running ``handle`` behind ``check`` (access/guard.py)."""
    guarded_handle: Handler[RequestT, ResponseT] = guarded(handle, check)
    return Route(request_type, guarded_handle, decode, check is not None)


class Routes(dict[int, AnyRoute]):
    """The route table by API key: a dict of the routes loaded so far, which loads a lazy
    route (``loaders``) at the first lookup of its key. A loaded route is an ordinary
    entry, so looking one up costs a dict lookup and nothing more. Call on the event
    loop's thread."""

    def __init__(
        self, routes: dict[int, AnyRoute], loaders: dict[int, Callable[[], AnyRoute]]
    ) -> None:
        super().__init__(routes)
        self.loaders = loaders

    def __missing__(self, api_key: int) -> AnyRoute:
        """Loads the lazy route of ``api_key``; raises KeyError for an API not routed."""
        route = self[api_key] = self.loaders[api_key]()
        return route

    def api_keys(self) -> set[int]:
        """Every routed API's key, loaded or not."""
        return self.keys() | self.loaders.keys()


def _describe_groups() -> AnyRoute:
    from kshim.api.groups import admin_access, describe_groups
    from kshim.protocol.messages.describe_groups import DescribeGroupsRequest

    return route(DescribeGroupsRequest, describe_groups.handle, admin_access.describe_groups_rule)


def _list_groups() -> AnyRoute:
    from kshim.api.groups import admin_access, list_groups
    from kshim.protocol.messages.list_groups import ListGroupsRequest

    return route(ListGroupsRequest, list_groups.handle, admin_access.list_groups_rule)


def _sasl_handshake() -> AnyRoute:
    from kshim.api.security import sasl_handshake
    from kshim.protocol.messages.sasl_handshake import SaslHandshakeRequest

    return route(SaslHandshakeRequest, sasl_handshake.handle, None)


def _delete_topics() -> AnyRoute:
    from kshim.api.admin import delete_topics, topic_admin_access
    from kshim.protocol.messages.delete_topics import DeleteTopicsRequest

    return route(DeleteTopicsRequest, delete_topics.handle, topic_admin_access.delete_topics_rule)


def _delete_records() -> AnyRoute:
    from kshim.api.records import delete_records, delete_records_access
    from kshim.protocol.messages.delete_records import DeleteRecordsRequest

    return route(
        DeleteRecordsRequest, delete_records.handle, delete_records_access.delete_records_rule
    )


def _describe_acls() -> AnyRoute:
    from kshim.api.security import access, describe_acls
    from kshim.protocol.messages.describe_acls import DescribeAclsRequest

    return route(DescribeAclsRequest, describe_acls.handle, access.describe_acls_rule)


def _create_acls() -> AnyRoute:
    from kshim.api.security import access, create_acls
    from kshim.protocol.messages.create_acls import CreateAclsRequest

    return route(CreateAclsRequest, create_acls.handle, access.create_acls_rule)


def _delete_acls() -> AnyRoute:
    from kshim.api.security import access, delete_acls
    from kshim.protocol.messages.delete_acls import DeleteAclsRequest

    return route(DeleteAclsRequest, delete_acls.handle, access.delete_acls_rule)


def _describe_configs() -> AnyRoute:
    from kshim.api.admin import config_access, describe_configs
    from kshim.protocol.messages.describe_configs import DescribeConfigsRequest

    return route(
        DescribeConfigsRequest, describe_configs.handle, config_access.describe_configs_rule
    )


def _alter_configs() -> AnyRoute:
    from kshim.api.admin import alter_configs, config_access
    from kshim.protocol.messages.alter_configs import AlterConfigsRequest

    return route(AlterConfigsRequest, alter_configs.handle, config_access.alter_configs_rule)


def _sasl_authenticate() -> AnyRoute:
    from kshim.api.security import sasl_authenticate
    from kshim.protocol.messages.sasl_authenticate import SaslAuthenticateRequest

    return route(SaslAuthenticateRequest, sasl_authenticate.handle, None)


def _create_partitions() -> AnyRoute:
    from kshim.api.admin import create_partitions, topic_admin_access
    from kshim.protocol.messages.create_partitions import CreatePartitionsRequest

    return route(
        CreatePartitionsRequest, create_partitions.handle, topic_admin_access.create_partitions_rule
    )


def _delete_groups() -> AnyRoute:
    from kshim.api.groups import admin_access, delete_groups
    from kshim.protocol.messages.delete_groups import DeleteGroupsRequest

    return route(DeleteGroupsRequest, delete_groups.handle, admin_access.delete_groups_rule)


def _incremental_alter_configs() -> AnyRoute:
    from kshim.api.admin import config_access, incremental_alter_configs
    from kshim.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest

    return route(
        IncrementalAlterConfigsRequest,
        incremental_alter_configs.handle,
        config_access.incremental_alter_configs_rule,
    )


def _offset_delete() -> AnyRoute:
    from kshim.api.groups import admin_access, offset_delete
    from kshim.protocol.messages.offset_delete import OffsetDeleteRequest

    return route(OffsetDeleteRequest, offset_delete.handle, admin_access.offset_delete_rule)


def _describe_user_scram_credentials() -> AnyRoute:
    from kshim.api.security import access, describe_user_scram_credentials
    from kshim.protocol.messages.describe_user_scram_credentials import (
        DescribeUserScramCredentialsRequest,
    )

    return route(
        DescribeUserScramCredentialsRequest,
        describe_user_scram_credentials.handle,
        access.describe_user_scram_credentials_rule,
    )


def _alter_user_scram_credentials() -> AnyRoute:
    from kshim.api.security import access, alter_user_scram_credentials
    from kshim.protocol.messages.alter_user_scram_credentials import (
        AlterUserScramCredentialsRequest,
    )

    return route(
        AlterUserScramCredentialsRequest,
        alter_user_scram_credentials.handle,
        access.alter_user_scram_credentials_rule,
    )


def _describe_producers() -> AnyRoute:
    from kshim.api.admin import describe_producers, topic_admin_access
    from kshim.protocol.messages.describe_producers import DescribeProducersRequest

    return route(
        DescribeProducersRequest,
        describe_producers.handle,
        topic_admin_access.describe_producers_rule,
    )


def _describe_transactions() -> AnyRoute:
    from kshim.api.transactions import admin_access, describe_transactions
    from kshim.protocol.messages.describe_transactions import DescribeTransactionsRequest

    return route(
        DescribeTransactionsRequest,
        describe_transactions.handle,
        admin_access.describe_transactions_rule,
    )


def _list_transactions() -> AnyRoute:
    from kshim.api.transactions import admin_access, list_transactions
    from kshim.protocol.messages.list_transactions import ListTransactionsRequest

    return route(
        ListTransactionsRequest,
        list_transactions.handle,
        admin_access.list_transactions_rule,
    )


EAGER_ROUTES: dict[int, AnyRoute] = {
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
    18: route(ApiVersionsRequest, api_versions.handle, None),
    19: route(CreateTopicsRequest, create_topics.handle, topic_access.create_topics_rule),
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
}
LAZY_ROUTES: dict[int, Callable[[], AnyRoute]] = {
    15: _describe_groups,
    16: _list_groups,
    17: _sasl_handshake,
    20: _delete_topics,
    21: _delete_records,
    29: _describe_acls,
    30: _create_acls,
    31: _delete_acls,
    32: _describe_configs,
    33: _alter_configs,
    36: _sasl_authenticate,
    37: _create_partitions,
    42: _delete_groups,
    44: _incremental_alter_configs,
    47: _offset_delete,
    50: _describe_user_scram_credentials,
    51: _alter_user_scram_credentials,
    61: _describe_producers,
    65: _describe_transactions,
    66: _list_transactions,
}
ROUTES = Routes(EAGER_ROUTES, LAZY_ROUTES)

assert ROUTES.api_keys() == ADVERTISED.keys(), "every advertised API needs a handler"
assert not EAGER_ROUTES.keys() & LAZY_ROUTES.keys(), "an API is routed once"

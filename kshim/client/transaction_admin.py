"""``kshim transactions``' wire queries: transactions, the producers of partitions, and the
abort of one partition's open transaction.

Requests go through kshim's own blocking client (``kshim.client.wire``), so the command
needs no client library and works against any Kafka broker of 3.0 or later (the versions
asked were all added by KIP-664 or before, none dropped by Kafka 4.0, KIP-896). Each goes
where Kafka's Admin client sends it, so that it also works against a cluster of several
brokers (kshim is one, and answers every request itself):

- Metadata v11: the brokers, and the leader of each partition of a topic;
- ListTransactions v0: every broker, each coordinating its own transactional ids;
- FindCoordinator v4 (key type TRANSACTION), then DescribeTransactions v0: the
  transactional id's coordinator;
- DescribeProducers v0, ApiVersions v2 and WriteTxnMarkers v1: the partition's leader;
- EndTxn v3 (a review's decision, ``kshim gateway``): the transactional id's coordinator.

DescribeTransactions is decoded by ``transaction_descriptions`` rather than by kio: a
transactional id that has no transaction under way (Empty) has the start time -1, which
kio's timestamp type refuses.
Every socket operation has a timeout; a connection is used by one thread.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from kio.schema.api_versions.v2.response import ApiVersionsResponse
from kio.schema.describe_producers.v0.response import DescribeProducersResponse
from kio.schema.end_txn.v3.response import EndTxnResponse
from kio.schema.find_coordinator.v4.response import FindCoordinatorResponse
from kio.schema.list_transactions.v0.response import ListTransactionsResponse
from kio.schema.metadata.v11.response import MetadataResponse
from kio.schema.write_txn_markers.v1.response import WriteTxnMarkersResponse

from kshim.client.errors import broken_off, check_answer, error_name, reason
from kshim.client.frames import MalformedResponseError, encode_body, split_response
from kshim.client.json_rows import JsonRow
from kshim.client.request_versions import (
    API_VERSIONS,
    DESCRIBE_PRODUCERS,
    DESCRIBE_TRANSACTIONS,
    END_TXN,
    FIND_COORDINATOR,
    LIST_TRANSACTIONS,
    METADATA,
    WRITE_TXN_MARKERS,
)
from kshim.client.sasl import AuthenticationFailed
from kshim.client.security import ClientSecurity
from kshim.client.topic_admin import AdminError
from kshim.client.transaction_descriptions import (
    ProducerState,
    TransactionDescription,
    describe_transactions_response,
    producer_state,
)
from kshim.client.wire import ConnectionClosedError, WireConnection, parse_bootstrap
from kshim.protocol.errors import ErrorCode
from kshim.protocol.primitives import DecodeError

_Response = TypeVar("_Response")
_Item = TypeVar("_Item")

CLIENT_ID = "kshim-transactions"
TRANSACTION_COORDINATOR = 1  # FindCoordinator's key type of a transactional id
NOT_FOUND = ErrorCode.transactional_id_not_found
READ_TIMEOUT_S = 15.0


class BrokerLacksApi(AdminError):
    """The broker does not serve an API the command needs (by its ApiVersions answer)."""


@dataclass(frozen=True, slots=True)
class TransactionListing(JsonRow):
    """One transactional id of ``kshim transactions list``."""

    transactional_id: str
    coordinator: int  # the node id of the broker that listed it
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class PartitionLeader:
    partition: int
    leader: int  # node id; -1 while the partition has none


@contextlib.contextmanager
def transaction_admin(
    bootstrap: str,
    timeout_s: float = READ_TIMEOUT_S,
    *,
    security: ClientSecurity | None = None,
) -> Iterator[TransactionAdmin]:
    """A TransactionAdmin whose connections start with the first broker of ``bootstrap``,
    each secured as ``security`` says (None: PLAINTEXT); every connection it opened is
    closed after.

    Raises ValueError for a bootstrap that is not host:port, OSError when the bootstrap
    broker cannot be reached or a broker does not answer in time, AdminError on an error
    answer, when another broker cannot be reached, or when a broker closes the connection
    or answers something malformed.
    """
    admin = TransactionAdmin(bootstrap, timeout_s, security=security)
    try:
        yield admin
    except (ConnectionClosedError, MalformedResponseError) as error:
        # A broker closes the connection on a request version it does not serve.
        raise AdminError(broken_off(bootstrap, "request", error, security)) from error
    finally:
        admin.close()


class TransactionAdmin:
    """The transaction requests; each raises AdminError on an error answer."""

    def __init__(
        self,
        bootstrap: str,
        timeout_s: float = READ_TIMEOUT_S,
        *,
        security: ClientSecurity | None = None,
    ) -> None:
        """Connects to the bootstrap broker; raises ValueError, OSError, and
        AuthenticationFailed when it refuses the SASL credentials."""
        self._timeout_s = timeout_s
        self._security = security
        self._bootstrap = parse_bootstrap(bootstrap)
        self._connections: dict[tuple[str, int], WireConnection] = {}
        self._connections[self._bootstrap] = WireConnection(
            *self._bootstrap, timeout_s, client_id=CLIENT_ID, security=security
        )
        self._brokers: dict[int, tuple[str, int]] | None = None

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()

    def list_transactions(
        self, states: Collection[str] = (), producer_ids: Collection[int] = ()
    ) -> list[TransactionListing]:
        """The transactional ids of every broker in one of ``states`` with one of
        ``producer_ids`` (an empty filter passes all), sorted by id then coordinator."""
        listings = []
        for node_id, address in sorted(self._broker_addresses().items()):
            request = {"state_filters": list(states), "producer_id_filters": list(producer_ids)}
            response = self._call(address, ListTransactionsResponse, LIST_TRANSACTIONS, request)
            _check(response.error_code, f"cannot list the transactions of broker {node_id}")
            if response.unknown_state_filters:
                unknown = ", ".join(map(str, response.unknown_state_filters))
                raise AdminError(f"broker {node_id} knows no transaction state {unknown}")
            listings += [
                TransactionListing(
                    str(state.transactional_id),
                    node_id,
                    int(state.producer_id),
                    str(state.transaction_state),
                )
                for state in response.transaction_states
            ]
        return sorted(listings, key=lambda found: (found.transactional_id, found.coordinator))

    def describe_transaction(self, transactional_id: str) -> TransactionDescription:
        """The coordinator's description; AdminError (TRANSACTIONAL_ID_NOT_FOUND, ...)."""
        found = self.describe_transactions([transactional_id]).get(transactional_id)
        if found is None:
            what = f"cannot describe transactional id {transactional_id}"
            raise AdminError(f"{what}: {error_name(NOT_FOUND)}")
        return found

    def describe_transactions(
        self, transactional_ids: Collection[str]
    ) -> dict[str, TransactionDescription | None]:
        """Each id's description by its coordinator, None for one the coordinator does not
        know (TRANSACTIONAL_ID_NOT_FOUND); AdminError for any other error."""
        by_coordinator: dict[tuple[int, str, int], list[str]] = {}
        for transactional_id in sorted(set(transactional_ids)):
            coordinator = self._coordinator(transactional_id)
            by_coordinator.setdefault(coordinator, []).append(transactional_id)
        described: dict[str, TransactionDescription | None] = {}
        for (node_id, host, port), ids in by_coordinator.items():
            for error_code, description in self._describe_on((host, port), node_id, ids):
                if error_code == NOT_FOUND:
                    described[description.transactional_id] = None
                else:
                    what = f"cannot describe transactional id {description.transactional_id}"
                    _check(error_code, what)
                    described[description.transactional_id] = description
        unanswered = sorted(set(transactional_ids) - described.keys())
        if unanswered:
            message = f"DescribeTransactionsResponse lacks {', '.join(unanswered)}"
            raise MalformedResponseError(message)
        return described

    def partition_leaders(self, topic: str, partition: int | None = None) -> list[PartitionLeader]:
        """The leader of each partition of ``topic``, or of the one ``partition``; raises
        AdminError for a topic or partition that does not exist."""
        request = {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
        response = self._call(self._bootstrap, MetadataResponse, METADATA, request)
        self._brokers = _broker_map(response)
        described = _only(response.topics, "MetadataResponse", "topic")
        _check(described.error_code, f"cannot describe topic {topic}")
        leaders = sorted(
            (
                PartitionLeader(int(found.partition_index), int(found.leader_id))
                for found in described.partitions
                if partition is None or int(found.partition_index) == partition
            ),
            key=lambda found: found.partition,
        )
        if not leaders:
            name = ErrorCode.unknown_topic_or_partition.name.upper()
            raise AdminError(f"topic {topic} has no partition {partition}: {name}")
        return leaders

    def describe_producers(
        self, topic: str, leaders: Collection[PartitionLeader]
    ) -> dict[int, list[ProducerState]]:
        """The producers each partition's leader knows, by partition."""
        by_address: dict[tuple[str, int], list[int]] = {}
        for found in leaders:
            address = self._leader_address(topic, found)
            by_address.setdefault(address, []).append(found.partition)
        producers: dict[int, list[ProducerState]] = {}
        for address, partitions in by_address.items():
            request = {"topics": [{"name": topic, "partition_indexes": partitions}]}
            response = self._call(address, DescribeProducersResponse, DESCRIBE_PRODUCERS, request)
            for answered in response.topics:
                for result in answered.partitions:
                    where = f"{answered.name}-{result.partition_index}"
                    _check(
                        result.error_code,
                        f"cannot describe the producers of {where}",
                        result.error_message,
                    )
                    producers[int(result.partition_index)] = [
                        producer_state(state) for state in result.active_producers
                    ]
        return producers

    def check_serves(
        self, topic: str, leader: PartitionLeader, api: tuple[int, int], name: str
    ) -> None:
        """Raises BrokerLacksApi unless the partition's leader says (ApiVersions) that it
        serves this version of the API, Kafka's ``name`` for it."""
        api_key, version = api
        address = self._leader_address(topic, leader)
        response = self._call(address, ApiVersionsResponse, API_VERSIONS, {})
        _check(response.error_code, f"cannot ask broker {leader.leader} for its API versions")
        broker = f"broker {leader.leader} at {_address(address)}"
        for served in response.api_keys:
            if int(served.api_key) == api_key:
                low, high = int(served.min_version), int(served.max_version)
                if low <= version <= high:
                    return
                raise BrokerLacksApi(
                    f"{broker} serves {name} (API key {api_key}) v{low}-{high}, not v{version}"
                )
        raise BrokerLacksApi(f"{broker} does not serve {name} (API key {api_key})")

    def write_abort_marker(
        self,
        topic: str,
        leader: PartitionLeader,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
    ) -> None:
        """Has the partition's leader write an ABORT marker for the producer's transaction
        (WriteTxnMarkers, as Kafka's Admin.abortTransaction does); raises AdminError."""
        marker = {
            "producer_id": producer_id,
            "producer_epoch": producer_epoch,
            "transaction_result": False,  # abort
            "topics": [{"name": topic, "partition_indexes": [leader.partition]}],
            "coordinator_epoch": coordinator_epoch,
        }
        address = self._leader_address(topic, leader)
        request = {"markers": [marker]}
        response = self._call(address, WriteTxnMarkersResponse, WRITE_TXN_MARKERS, request)
        for result in response.markers:
            for answered in result.topics:
                for partition in answered.partitions:
                    what = f"cannot abort the transaction on {answered.name}-{leader.partition}"
                    _check(partition.error_code, what)

    def end_transaction(self, description: TransactionDescription, commit: bool) -> None:
        """Ends the described transaction at its coordinator, as its producer's EndTxn
        would (the same producer id and epoch); raises AdminError, e.g. INVALID_TXN_STATE
        when it has ended the other way since it was described."""
        _, host, port = self._coordinator(description.transactional_id)
        request = {"transactional_id": description.transactional_id, "committed": commit,
                   "producer_id": description.producer_id,
                   "producer_epoch": description.producer_epoch}  # fmt: skip
        response = self._call((host, port), EndTxnResponse, END_TXN, request)
        outcome = "commit" if commit else "abort"
        _check(response.error_code, f"cannot {outcome} {description.transactional_id}")

    def _coordinator(self, transactional_id: str) -> tuple[int, str, int]:
        """(node id, host, port) of the transactional id's coordinator."""
        request = {"key_type": TRANSACTION_COORDINATOR, "coordinator_keys": [transactional_id]}
        response = self._call(self._bootstrap, FindCoordinatorResponse, FIND_COORDINATOR, request)
        found = _only(response.coordinators, "FindCoordinatorResponse", "coordinator")
        what = f"cannot find the coordinator of transactional id {transactional_id}"
        _check(found.error_code, what, found.error_message)
        return int(found.node_id), str(found.host), int(found.port)

    def _describe_on(
        self, address: tuple[str, int], node_id: int, transactional_ids: list[str]
    ) -> list[tuple[int, TransactionDescription]]:
        """DescribeTransactions on one coordinator: (error code, description) of each id."""
        api_key, version = DESCRIBE_TRANSACTIONS
        body = encode_body(api_key, version, {"transactional_ids": transactional_ids})
        frame = self._connection(address).exchange(api_key, version, body, flexible=True)
        _, payload = split_response(api_key, version, frame)
        try:
            return describe_transactions_response(payload, node_id)
        except (DecodeError, struct.error, UnicodeDecodeError) as error:
            message = f"DescribeTransactionsResponse: {error}"
            raise MalformedResponseError(message) from error

    def _broker_addresses(self) -> dict[int, tuple[str, int]]:
        if self._brokers is None:
            request = {"topics": [], "allow_auto_topic_creation": False}
            self._brokers = _broker_map(
                self._call(self._bootstrap, MetadataResponse, METADATA, request)
            )
        return self._brokers

    def _leader_address(self, topic: str, leader: PartitionLeader) -> tuple[str, int]:
        """Where the partition's leader listens; AdminError while it has none."""
        address = self._broker_addresses().get(leader.leader)
        if address is None:
            name = ErrorCode.leader_not_available.name.upper()
            raise AdminError(f"{topic}-{leader.partition} has no leader now: {name}")
        return address

    def _connection(self, address: tuple[str, int]) -> WireConnection:
        connection = self._connections.get(address)
        if connection is None:
            where = _address(address)
            try:
                connection = WireConnection(
                    *address, self._timeout_s, client_id=CLIENT_ID, security=self._security
                )
            except OSError as error:
                raise AdminError(f"cannot reach broker {where}: {reason(error)}") from error
            except AuthenticationFailed as error:
                raise AdminError(f"cannot authenticate to broker {where}: {error}") from error
            self._connections[address] = connection
        return connection

    def _call(
        self,
        address: tuple[str, int],
        response_type: type[_Response],
        api: tuple[int, int],
        fields: Mapping[str, object],
    ) -> _Response:
        api_key, version = api
        return self._connection(address).call_for(response_type, api_key, version, fields)


def _only(items: Sequence[_Item], response: str, what: str) -> _Item:
    """The one item of an answer to a request that asked for one."""
    if len(items) != 1:
        raise MalformedResponseError(f"{response} has {len(items)} {what}s, asked for one")
    return items[0]


def _broker_map(metadata: MetadataResponse) -> dict[int, tuple[str, int]]:
    return {
        int(broker.node_id): (str(broker.host), int(broker.port)) for broker in metadata.brokers
    }


def _address(address: tuple[str, int]) -> str:
    host, port = address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _check(error_code: int, what: str, message: str | None = None) -> None:
    check_answer(AdminError, error_code, what, message)

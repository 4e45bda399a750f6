"""Sans-io rewriting of the answers that name brokers or bound what a client may ask.

- Metadata, FindCoordinator and DescribeCluster name brokers by host and port: each is
  decoded (kio), every upstream address replaced by the gateway port standing for that
  node (addresses.py), and encoded again in the same version. The upstream addresses are
  learned on the way (``Topology``), so a gateway port can be connected to its broker.
- ApiVersions bounds the versions a client will use: versions whose answers could name a
  broker where the gateway does not look are taken off (Produce v10+ and Fetch v16+ carry
  the new leader's endpoint after a leadership change, KIP-951; DescribeQuorum v2+ the
  voters' endpoints, KIP-853), and the rewritten APIs stop at the versions kio can decode.

Every other answer is relayed untouched (relay.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from kshim.client.frames import MalformedResponseError, decode_response
from kshim.gateway.addresses import GatewayPorts, Topology
from kshim.protocol import codec
from kshim.protocol.headers import API_VERSIONS_KEY, encode_response_header

METADATA_KEY = 3
FIND_COORDINATOR_KEY = 10
DESCRIBE_CLUSTER_KEY = 60
REWRITTEN = frozenset({METADATA_KEY, FIND_COORDINATOR_KEY, DESCRIBE_CLUSTER_KEY, API_VERSIONS_KEY})
# The highest version a client is offered, where the upstream's could be higher.
VERSION_CAPS = {
    0: 9,  # Produce: v10 answers may name the new leader (KIP-951)
    1: 15,  # Fetch: v16 likewise
    METADATA_KEY: 13,  # the newest kio decodes
    FIND_COORDINATOR_KEY: 6,
    DESCRIBE_CLUSTER_KEY: 2,
    55: 1,  # DescribeQuorum: v2 names the voters' endpoints (KIP-853)
}
# APIs whose every version names brokers the gateway does not map: not offered at all
# (ShareFetch and ShareAcknowledge, KIP-932).
HIDDEN = frozenset({78, 79})


class UnreadableAnswer(Exception):
    """An answer the gateway must rewrite does not decode as its request's version."""


# Told of each upstream broker seen for the first time (its gateway port must then listen).
NewBroker = Callable[[int], None]
# Rewrites a Metadata answer's full-data views (full/metadata.py): the decoded answer, and
# whether it answers a request for every topic.
ViewsInMetadata = Callable[[object, bool], object]


@dataclasses.dataclass(frozen=True, slots=True)
class AnswerRewriter:
    ports: GatewayPorts
    topology: Topology
    new_broker: NewBroker
    views: ViewsInMetadata | None = None
    version_caps: Mapping[int, int] = dataclasses.field(default_factory=lambda: VERSION_CAPS)
    hidden: frozenset[int] = HIDDEN  # APIs not offered at all

    def rewrite(self, api_key: int, version: int, payload: bytes, lists_all: bool = False) -> bytes:
        """The answer ``payload`` (a frame without its size) as the client gets it;
        ``lists_all``: a Metadata answer to a request for every topic. Raises
        UnreadableAnswer."""
        if api_key == API_VERSIONS_KEY:
            return _api_versions(version, payload, self.version_caps, self.hidden)
        try:
            correlation_id, answer = decode_response(api_key, version, payload)
        except (MalformedResponseError, KeyError) as error:
            raise UnreadableAnswer(f"api {api_key} v{version}: {error}") from error
        if api_key == METADATA_KEY:
            answer = self._metadata(answer)
            if self.views is not None:
                answer = self.views(answer, lists_all)
        elif api_key == FIND_COORDINATOR_KEY:
            answer = self._find_coordinator(version, answer)
        else:
            answer = self._describe_cluster(answer)
        return encode_answer(api_key, version, correlation_id, answer)

    def _address(self, node_id: int, host: str, port: int) -> tuple[str, int]:
        """The gateway address standing for upstream broker ``node_id`` at host:port."""
        if self.topology.learn(node_id, host, port):
            self.new_broker(node_id)
        return self.ports.host, self.ports.port_of(node_id)

    def _metadata(self, answer: Any) -> Any:
        brokers = tuple(self._moved(broker, broker.node_id) for broker in answer.brokers)
        return dataclasses.replace(answer, brokers=brokers)

    def _describe_cluster(self, answer: Any) -> Any:
        brokers = tuple(self._moved(broker, broker.broker_id) for broker in answer.brokers)
        return dataclasses.replace(answer, brokers=brokers)

    def _find_coordinator(self, version: int, answer: Any) -> Any:
        if version >= 4:  # one coordinator per key asked (KIP-699)
            coordinators = tuple(
                self._moved(coordinator, coordinator.node_id)
                if coordinator.error_code == 0
                else coordinator
                for coordinator in answer.coordinators
            )
            return dataclasses.replace(answer, coordinators=coordinators)
        return self._moved(answer, answer.node_id) if answer.error_code == 0 else answer

    def _moved(self, entry: Any, node_id: int) -> Any:
        host, port = self._address(node_id, entry.host, entry.port)
        return dataclasses.replace(entry, host=host, port=port)


def encode_answer(api_key: int, version: int, correlation_id: int, answer: Any) -> bytes:
    """An answer's payload (header and body, without the size) for kio's ``answer``."""
    flexible = api_key != API_VERSIONS_KEY and codec.is_flexible(api_key, version)
    body = codec.encode_entity(codec.response_class(api_key, version), answer)
    return encode_response_header(correlation_id, flexible) + body


def _api_versions(
    version: int, payload: bytes, caps: Mapping[int, int], hidden: frozenset[int]
) -> bytes:
    """ApiVersions with the versions the gateway cannot relay taken off. An answer that is
    not of the version asked (the v0-format refusal of a version above the broker's, KIP-511)
    goes through unchanged: the client asks again at a version both know."""
    try:
        correlation_id, answer = decode_response(API_VERSIONS_KEY, version, payload)
    except (MalformedResponseError, KeyError):
        return payload
    if answer.error_code != 0:
        return payload
    kept = tuple(_capped(entry, caps) for entry in answer.api_keys if entry.api_key not in hidden)
    answer = dataclasses.replace(answer, api_keys=kept)
    return encode_answer(API_VERSIONS_KEY, version, correlation_id, answer)


def _capped(entry: Any, caps: Mapping[int, int]) -> Any:
    cap = caps.get(entry.api_key)
    if cap is None or entry.max_version <= cap:
        return entry
    return dataclasses.replace(entry, max_version=max(cap, entry.min_version))

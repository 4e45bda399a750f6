"""Sans-io screening of a Produce naming a delay companion (or a view), by kshim's broker's
rules.

On kshim's broker a batch produced to ``T.delay`` is refused whole, with INVALID_RECORD
and the reason as the answer's error_message (v8+), when one of its records asks for no
valid delay (broker/delay/requests.py, docs/delayed-delivery.md). The gateway checks the
same before Kafka sees the request, so that the upstream topic ``T.delay`` holds only
valid records, each as the client produced it. Kafka answers each partition of a Produce
on its own (https://kafka.apache.org/protocol#The_Messages_Produce), so one refused batch
does not keep the others out:

- every batch valid: the request goes upstream as it came;
- some refused: the request is encoded again without them (the header and every kept
  batch's bytes as they came), and their refusals are merged into the upstream's answer
  (``merged_answer``). A request left with no partition still goes upstream, Kafka
  answering an empty Produce with an empty answer: the gateway makes no answer of its own,
  so every answer keeps its place in the connection's order (relay.py).

Where the gateways serve full-data views, a Produce to ``T.full`` is refused the same way,
INVALID_REQUEST, as the broker refuses it: the view is read-only.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Callable, Sequence
from typing import Any

from kshim.broker.clock import wall_clock_ms
from kshim.broker.config.keys import BROKER_DEFAULTS
from kshim.broker.delay.naming import reserved_for_delay
from kshim.broker.delay.requests import check_batch
from kshim.broker.full_view.naming import reserved_for_view
from kshim.broker.partitions.batch_checks import Refused, check_records, checked_batch
from kshim.client.frames import MalformedResponseError, decode_response
from kshim.gateway.answers import UnreadableAnswer, encode_answer
from kshim.gateway.requests import PRODUCE_KEY, Refusal
from kshim.protocol import codec
from kshim.protocol.errors import ErrorCode
from kshim.protocol.headers import REQUEST_HEADER_FIXED, parse_request_header
from kshim.protocol.produce_request import FIRST_FLEXIBLE_VERSION, decode_produce_request

DEFAULT_MAX_DELAY_MS = int(BROKER_DEFAULTS["kshim.delay.max.ms"])
# A batch's size is the cluster's to bound (its max.message.bytes, per topic).
NO_SIZE_BOUND = sys.maxsize
NO_OFFSET = -1


@dataclasses.dataclass(frozen=True, slots=True)
class Screened:
    """What goes upstream for a Produce naming a delay companion."""

    payload: bytes | None  # the request in place of the client's; None: the client's
    refused: tuple[Refusal, ...]  # the partitions taken out, answered by the gateway


@dataclasses.dataclass(frozen=True, slots=True)
class DelayRules:
    """The broker's checks of a delay companion's batches: ``max_delay_ms`` is its
    ``kshim.delay.max.ms``, ``clock`` gives the time in epoch ms."""

    max_delay_ms: int = DEFAULT_MAX_DELAY_MS
    clock: Callable[[], int] = wall_clock_ms
    # Refuse every batch for a full-data view ``T.full``, read-only as on the broker, where
    # the gateways serve views (its placeholder topic upstream would take them).
    read_only_views: bool = False

    def screen(self, payload: bytes | bytearray | memoryview) -> Screened:
        """The request (a frame without its size) to send upstream in place of the client's
        Produce ``payload``; raises DecodeError when it does not decode (v0-2 included,
        which kshim's broker does not serve either)."""
        payload = bytes(payload)
        version = REQUEST_HEADER_FIXED.unpack_from(payload, 0)[1]
        _, body = parse_request_header(payload, version >= FIRST_FLEXIBLE_VERSION)
        request = decode_produce_request(version, payload, body)
        now_ms = self.clock()
        refused = tuple(
            Refusal(topic.name, partition.index, *refusal)
            for topic in request.topic_data
            for partition in topic.partition_data
            if (refusal := self._topic_refusal(topic.name, partition.records, now_ms))
        )
        if not refused:
            return Screened(None, ())
        return Screened(payload[:body] + _without(version, payload, body, refused), refused)

    def _topic_refusal(
        self, name: str, records: memoryview | None, now_ms: int
    ) -> tuple[int, str] | None:
        if reserved_for_delay(name):
            return self._refusal(records, now_ms)
        if self.read_only_views and reserved_for_view(name):
            # The broker's words (kshim/broker/topic_resolver.py).
            message = f"{name} is a read-only full-data view; produce to its topic instead"
            return ErrorCode.invalid_request.value, message
        return None

    def _refusal(self, records: memoryview | None, now_ms: int) -> tuple[int, str] | None:
        """Why the broker would refuse the batch (error code, message), as PartitionService
        checks it; the timestamps' window is the cluster's own check."""
        check = functools.partial(check_batch, max_delay_ms=self.max_delay_ms)
        try:
            batch, _ = checked_batch(records, NO_SIZE_BOUND)
            check_records(check, batch, now_ms)
        except Refused as refused:
            return refused.code, refused.message
        return None


def _without(version: int, payload: bytes, body: int, refused: Sequence[Refusal]) -> bytes:
    """The body of Produce ``payload`` without the ``refused`` partitions (kio re-encodes
    the fields; each kept batch's bytes are copied as they are)."""
    request = codec.decode_request(PRODUCE_KEY, version, payload, body)
    gone = {(refusal.topic, refusal.partition) for refusal in refused}
    topics = []
    for topic in request.topic_data:
        kept = tuple(data for data in topic.partition_data if (topic.name, data.index) not in gone)
        if kept:
            topics.append(dataclasses.replace(topic, partition_data=kept))
    request = dataclasses.replace(request, topic_data=tuple(topics))
    return codec.encode_entity(codec.request_class(PRODUCE_KEY, version), request)


def merged_answer(version: int, payload: bytes, refused: Sequence[Refusal]) -> bytes:
    """The upstream's answer ``payload`` (a frame without its size) to a screened Produce,
    with the ``refused`` partitions' answers added; raises UnreadableAnswer."""
    try:
        correlation_id, answer = decode_response(PRODUCE_KEY, version, payload)
    except (MalformedResponseError, KeyError) as error:
        raise UnreadableAnswer(f"Produce v{version}: {error}") from error
    schema = sys.modules[codec.response_class(PRODUCE_KEY, version).__module__]
    responses = list(answer.responses)
    for name in dict.fromkeys(refusal.topic for refusal in refused):
        added = tuple(
            _refused_answer(schema.PartitionProduceResponse, refusal)
            for refusal in refused
            if refusal.topic == name
        )
        place = next((i for i, topic in enumerate(responses) if topic.name == name), None)
        if place is None:
            responses.append(schema.TopicProduceResponse(name=name, partition_responses=added))
        else:
            topic = responses[place]
            partitions = topic.partition_responses + added
            responses[place] = dataclasses.replace(topic, partition_responses=partitions)
    answer = dataclasses.replace(answer, responses=tuple(responses))
    return encode_answer(PRODUCE_KEY, version, correlation_id, answer)


def _refused_answer(partition_class: type[Any], refusal: Refusal) -> Any:
    body = {
        "index": refusal.partition,
        "error_code": ErrorCode(refusal.error_code),
        "base_offset": NO_OFFSET,
        "error_message": refusal.message,  # v8+; dropped before
    }
    return codec.build(partition_class, body, any_version=True)

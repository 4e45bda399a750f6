"""Raw-protocol steps of benchmarks.scale, over kshim.client.wire: creating many topics,
timing Metadata, the log end offsets of many partitions, Produce requests that touch many
partitions at once, the first acknowledged produce after a restart, and the fsync count a
kshim prints as it stops.

A raw client, not librdkafka, where the benchmark needs one exact request: a Metadata
request naming all N topics, one Produce request touching 1,000 partitions. Requests are
encoded before their clock starts, so a time is the broker's answer, not kio's encoding of
10,000 topic names. Every call has a deadline.
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.pipelined_produce import PRODUCE_KEY, PRODUCE_VERSION, produce_frame
from kshim.client.frames import decode_response, encode_request
from kshim.client.wire import WireConnection, connect
from kshim.protocol.records import Record, build_batch

CREATE_TOPICS_KEY, CREATE_TOPICS_VERSION = 19, 4
METADATA_KEY, METADATA_VERSION = 3, 12
LIST_OFFSETS_KEY, LIST_OFFSETS_VERSION = 2, 7
CREATE_BATCH = 1_000  # topics per CreateTopics request
REQUEST_TIMEOUT_S = 180.0  # a Metadata answer for 20,000 topics may take seconds here
LATEST_TIMESTAMP = -1  # ListOffsets: the log end offset (the protocol guide's "latest")
CONSUMER_REPLICA_ID = -1
NO_EPOCH = -1
FIRST_PRODUCE_RETRY_S = 0.01
SERVED_POLL_S = 0.2
# What kshim prints on standard error as it stops gracefully, e.g.
# "kshim stopped after 12.3 s: 4567 fsyncs, 89012 bytes made durable (...)".
STOP_LINE = re.compile(r"^kshim stopped after .*?(\d+) fsyncs", re.MULTILINE)


def topic_names(count: int) -> list[str]:
    """``count`` topic names, sorted as created (zero-padded so names sort numerically)."""
    return [f"scale-{index:05d}" for index in range(count)]


def create_topics(
    bootstrap: str, topics: Sequence[str], configs: Mapping[str, str]
) -> dict[str, str]:
    """Creates ``topics`` (one partition, replication 1, ``configs``) in CreateTopics
    requests of 1,000, one after another; returns {topic: error} for every topic not
    acknowledged as created. Raises OSError when the broker stops answering."""
    failures: dict[str, str] = {}
    entries = [{"name": name, "value": value} for name, value in configs.items()]
    with connect(bootstrap, REQUEST_TIMEOUT_S) as connection:
        for start in range(0, len(topics), CREATE_BATCH):
            batch = topics[start : start + CREATE_BATCH]
            response = connection.call(
                CREATE_TOPICS_KEY,
                CREATE_TOPICS_VERSION,
                {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1,
                             "configs": entries} for name in batch],
                 "timeout": int(REQUEST_TIMEOUT_S * 1000), "validate_only": False},
            )  # fmt: skip
            answered = {result.name: result for result in response.topics}
            for name in batch:
                result = answered.get(name)
                if result is None:
                    failures[name] = "not in the answer"
                elif result.error_code != 0:
                    failures[name] = f"{_code_name(result.error_code)}: {result.error_message}"
    return failures


def wait_until_served(bootstrap: str, topics: Sequence[str], timeout_s: float) -> float:
    """Seconds until a Metadata request naming every one of ``topics`` finds each with a
    leader and no error: a Kafka answers CreateTopics, and ApiVersions after a restart,
    before its controller has made every partition's leader known (a producer then calls
    the topics not yet served unknown). Raises TimeoutError after ``timeout_s``."""
    named = {"topics": [{"name": name} for name in topics], "allow_auto_topic_creation": False}
    started = time.perf_counter()
    with connect(bootstrap, REQUEST_TIMEOUT_S) as connection:
        while True:
            answer = connection.call(METADATA_KEY, METADATA_VERSION, named)
            waiting = sum(1 for topic in answer.topics if not _served(topic))
            if not waiting:
                return time.perf_counter() - started
            if time.perf_counter() - started > timeout_s:
                raise TimeoutError(f"{waiting:,} of {len(topics):,} topics still not served")
            time.sleep(SERVED_POLL_S)


def _served(topic: Any) -> bool:
    return topic.error_code == 0 and all(
        partition.error_code == 0 and partition.leader_id >= 0 for partition in topic.partitions
    )


def metadata_latency(bootstrap: str, topics: Sequence[str], requests: int) -> dict[str, float]:
    """Medians (ms) of ``requests`` Metadata requests for all topics and of as many naming
    every one of ``topics``, on one connection; also how many topics the all-topics answer
    listed and how many named topics came back with an error."""
    everything = {"topics": None, "allow_auto_topic_creation": False}
    named = {"topics": [{"name": name} for name in topics], "allow_auto_topic_creation": False}
    with connect(bootstrap, REQUEST_TIMEOUT_S) as connection:
        all_ms, all_answer = _timed_metadata(connection, everything, requests)
        named_ms, named_answer = _timed_metadata(connection, named, requests)
    return {
        "metadata_all_topics_ms": statistics.median(all_ms),
        "metadata_named_ms": statistics.median(named_ms),
        "metadata_topics_listed": len(all_answer.topics),
        "metadata_named_errors": sum(1 for topic in named_answer.topics if topic.error_code),
    }


def _timed_metadata(
    connection: WireConnection, fields: Mapping[str, Any], requests: int
) -> tuple[list[float], Any]:
    """ms from send to answer of each request, and the last answer decoded."""
    times, frame = [], b""
    for _ in range(requests):
        correlation_id = connection.next_correlation_id()
        request = encode_request(METADATA_KEY, METADATA_VERSION, correlation_id, fields)
        started = time.perf_counter()
        connection.send(request)
        frame = connection.read_frame()
        times.append((time.perf_counter() - started) * 1000)
    return times, decode_response(METADATA_KEY, METADATA_VERSION, frame)[1]


def missing_topics(bootstrap: str, topics: Sequence[str]) -> set[str]:
    """Those of ``topics`` that a Metadata request naming them all does not find (never
    auto-created by the request)."""
    fields = {"topics": [{"name": name} for name in topics], "allow_auto_topic_creation": False}
    with connect(bootstrap, REQUEST_TIMEOUT_S) as connection:
        response = connection.call(METADATA_KEY, METADATA_VERSION, fields)
    found = {topic.name for topic in response.topics if topic.error_code == 0}
    return set(topics) - found


def log_end_offsets(bootstrap: str, topics: Sequence[str]) -> dict[str, int]:
    """Partition 0's log end offset of each topic, from one ListOffsets request ("latest");
    a partition answered with an error is left out."""
    fields = {
        "replica_id": CONSUMER_REPLICA_ID,
        "isolation_level": 0,
        "topics": [{"name": name, "partitions": [{"partition_index": 0,
                    "current_leader_epoch": NO_EPOCH, "timestamp": LATEST_TIMESTAMP}]}
                   for name in topics],
    }  # fmt: skip
    with connect(bootstrap, REQUEST_TIMEOUT_S) as connection:
        response = connection.call(LIST_OFFSETS_KEY, LIST_OFFSETS_VERSION, fields)
    return {
        topic.name: partition.offset
        for topic in response.topics
        for partition in topic.partitions
        if partition.error_code == 0
    }


def wide_produce_frame(topics: Sequence[str], value_bytes: int = 100) -> bytes:
    """One acks=all Produce request carrying one plain (non-idempotent, so resendable)
    record to partition 0 of every one of ``topics``."""
    batch = build_batch([Record(0, 1_700_000_000_000, None, b"w" * value_bytes)])
    fields = {"transactional_id": None, "acks": -1, "timeout": 30_000,
              "topic_data": [{"name": name, "partition_data": [{"index": 0, "records": batch}]}
                             for name in topics]}  # fmt: skip
    return encode_request(PRODUCE_KEY, PRODUCE_VERSION, 1, fields)


def wide_produce(bootstrap: str, topics: Sequence[str], requests: int) -> dict[str, float]:
    """Sends ``requests`` Produce requests that each touch every one of ``topics``, one at
    a time; returns the median ms per request and how many partitions the last answer
    refused."""
    frame = wide_produce_frame(topics)
    times = []
    answer = b""
    with connect(bootstrap, REQUEST_TIMEOUT_S) as connection:
        for _ in range(requests):
            started = time.perf_counter()
            connection.send(frame)
            answer = connection.read_frame()
            times.append((time.perf_counter() - started) * 1000)
    response = decode_response(PRODUCE_KEY, PRODUCE_VERSION, answer)[1]
    refused = sum(
        1
        for topic in response.responses
        for partition in topic.partition_responses
        if partition.error_code != 0
    )
    return {"wide_produce_ms": statistics.median(times), "wide_produce_refused": refused}


def seconds_to_first_produce(bootstrap: str, topic: str, deadline_s: float) -> float:
    """Seconds until an acks=all Produce of one record to ``topic`` is acknowledged,
    retrying every 10 ms on a fresh connection; raises TimeoutError (with the last error)
    at the deadline."""
    frame = produce_frame(topic, records=1, value_bytes=20)
    started = time.perf_counter()
    last_error = "no answer"
    while time.perf_counter() - started < deadline_s:
        try:
            with connect(bootstrap, deadline_s) as connection:
                connection.send(frame)
                response = decode_response(PRODUCE_KEY, PRODUCE_VERSION, connection.read_frame())
            code = response[1].responses[0].partition_responses[0].error_code
            if code == 0:
                return time.perf_counter() - started
            last_error = _code_name(code)
        except OSError as error:
            last_error = f"{type(error).__name__}: {error}"
        time.sleep(FIRST_PRODUCE_RETRY_S)
    raise TimeoutError(f"no produce acknowledged within {deadline_s:g} s; last: {last_error}")


def fsyncs_at_stop(stderr_path: Path) -> int | None:
    """The fsync count kshim printed as it stopped, or None when it printed none (a
    kshim without that line, or a run that did not stop gracefully)."""
    try:
        text = stderr_path.read_text(errors="replace")
    except OSError:
        return None
    counts = STOP_LINE.findall(text)
    return int(counts[-1]) if counts else None


def _code_name(code: object) -> str:
    """kio's error code enum member's name, or the bare number."""
    return str(getattr(code, "name", code))

"""What a topic with ``cleanup.policy=compact`` asks of the records produced to it.

Kafka's LogValidator refuses a record without a key on a compacted topic
(InvalidRecordException: INVALID_RECORD): the log cleaner could only throw it away
(storage/log/cleaner.py does, as Kafka's does, with records written before the topic was
compacted). Checking it decodes every batch produced to such a topic, which only
compacted topics pay.
"""

from __future__ import annotations

from collections.abc import Mapping

from kshim.protocol.keyed_records import keyed_records
from kshim.protocol.primitives import DecodeError
from kshim.protocol.record_batch import read_header


def compacts(configs: Mapping[str, str]) -> bool:
    """Whether a topic's ``cleanup.policy`` includes compact."""
    return "compact" in configs["cleanup.policy"].split(",")


def keyless_refusal(batch: memoryview, _now_ms: int) -> str | None:
    """Why Produce refuses ``batch`` for a compacted topic (a record without a key, or
    records that do not decode), or None (WritablePartition.check)."""
    header = read_header(batch)
    try:
        keyed = sum(1 for _ in keyed_records(batch, header))
    except DecodeError as error:
        return f"malformed records: {error}"
    if keyed != header.records_count:
        return "Compacted topic cannot accept message without key"
    return None

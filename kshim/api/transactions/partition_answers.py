"""Answers per partition, grouped by topic as Kafka's responses list them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from kshim.storage.interface import TopicPartition

Answer = TypeVar("Answer")


def by_topic(
    answers: Iterable[tuple[TopicPartition, Answer]],
) -> dict[str, list[tuple[int, Answer]]]:
    """Each topic's (partition index, answer) pairs: topics in the order their first
    partition comes in ``answers``, and each topic's partitions in the order given."""
    topics: dict[str, list[tuple[int, Answer]]] = {}
    for topic_partition, answer in answers:
        topics.setdefault(topic_partition.topic, []).append((topic_partition.partition, answer))
    return topics

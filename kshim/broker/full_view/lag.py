"""How far each kept view is behind its topic (the alarm on view lag reads it)."""

from __future__ import annotations

from kshim.broker.full_view.applier import ViewHost
from kshim.storage.interface import TopicPartition


async def view_lags(broker: ViewHost) -> list[tuple[TopicPartition, int]]:
    """Each partition of every kept view with the records it has yet to apply: up to its
    topic's last stable offset, as the applier goes."""
    view = broker.full_view
    lags = []
    for name, topic in list(broker.topics.by_name.items()):
        if not view.keeps(topic):
            continue
        for index, log in enumerate(topic.logs):
            topic_partition = TopicPartition(name, index)
            transactions = broker.transactions.partition(topic_partition)
            stable = transactions.last_stable_offset(log.high_watermark)
            lags.append(
                (topic_partition, max(stable - await view.applied_position(topic_partition), 0))
            )
    return lags

"""The apply job's progress as a Kafka consumer group, so the broker shows how far behind it is.

Spark's Kafka source keeps its offsets in the query's checkpoint and commits nothing to
Kafka, and the sink keeps the next offset to apply in the destination itself
(sink.py: one transaction with the rows): so no broker, kshim or Kafka, can tell how far
the destination lags. After each micro-batch is applied, the job commits the next offset
of each partition it applied to a consumer group of its own, as Kafka's admin client
commits for an empty group (AdminClient.alterConsumerGroupOffsets: no generation, no
member). The broker then reports the apply's lag like any consumer's: records behind
(``kshim_group_lag``), seconds the oldest unapplied change has waited
(``kshim_group_lag_seconds``), the ``group_lag`` alarm, the dashboard's lag panels, and
``kshim groups`` (docs/metrics.md). The destination stays the truth for exactly-once:
the group is a report, written after the destination committed, so a commit that fails
costs a late report, never a change, and is only logged.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable

from kshim.client.group_admin import GroupAdmin, GroupAdminError
from kshim.client.sasl import AuthenticationFailed
from kshim.client.security import ClientSecurity
from spark_examples.apply.sink import SourceRecord

log = logging.getLogger(__name__)
GROUP_PREFIX = "kshim-apply-"
COMMIT_TIMEOUT_S = 10.0


def default_group(dest: str) -> str:
    """A group per destination, named from a digest of its URL: stable across restarts,
    distinct for two destinations of one topic, and without the URL's password."""
    return GROUP_PREFIX + hashlib.sha256(dest.encode()).hexdigest()[:12]


def next_offsets(records: Iterable[SourceRecord]) -> dict[str, dict[int, int]]:
    """Per topic and partition, the offset after the last record of ``records``."""
    offsets: dict[str, dict[int, int]] = {}
    for record in records:
        partitions = offsets.setdefault(record.topic, {})
        partitions[record.partition] = max(partitions.get(record.partition, 0), record.offset + 1)
    return offsets


def report_progress(
    bootstrap: str,
    group: str,
    records: Iterable[SourceRecord],
    security: ClientSecurity | None = None,
) -> bool:
    """Commits the group's offsets past ``records`` (all applied); False, with a warning,
    when the broker could not take them."""
    offsets = next_offsets(records)
    if not offsets:
        return True
    try:
        with GroupAdmin.connected(bootstrap, COMMIT_TIMEOUT_S, security=security) as admin:
            for topic, partitions in sorted(offsets.items()):
                admin.commit(group, topic, partitions)
    except (OSError, GroupAdminError, AuthenticationFailed) as error:
        log.warning("apply progress not reported to group %s: %s", group, error)
        return False
    return True

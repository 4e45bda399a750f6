"""What Fetch and Metadata read of the broker, as Protocols the Broker satisfies
(api/services.py names each service; Produce and ListOffsets each read one of them)."""

from __future__ import annotations

from typing import Protocol

from kshim.api.services import (
    WithAppendWaiters,
    WithConfig,
    WithEndpoints,
    WithFetchSessions,
    WithRefusals,
    WithResolver,
    WithTopicDescriptions,
    WithTraffic,
)


class FetchServices(
    WithResolver, WithFetchSessions, WithAppendWaiters, WithTraffic, WithRefusals, Protocol
):
    """Fetch's: the partitions behind the names, the fetch sessions, the long polls, the
    traffic counters and the refusal log."""


class MetadataServices(
    WithResolver, WithTopicDescriptions, WithEndpoints, WithConfig, WithRefusals, Protocol
):
    """Metadata's: the topics and their encoded entries, the advertised listeners, the
    configuration (auto-creation) and the refusal log."""

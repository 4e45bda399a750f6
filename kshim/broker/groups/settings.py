"""Group coordinator settings, read from the broker configuration (Kafka key names)."""

from __future__ import annotations

from dataclasses import dataclass

from kshim.broker.config.broker_config import BrokerConfig

MINUTE_MS = 60_000


@dataclass(frozen=True, slots=True)
class GroupSettings:
    initial_rebalance_delay_ms: int = 0  # group.initial.rebalance.delay.ms
    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    offsets_retention_ms: int = 10080 * MINUTE_MS  # offsets.retention.minutes
    retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms
    max_metadata_bytes: int = 4096  # offset.metadata.max.bytes

    @classmethod
    def from_config(cls, config: BrokerConfig) -> GroupSettings:
        return cls(
            initial_rebalance_delay_ms=config.get_int("group.initial.rebalance.delay.ms"),
            min_session_timeout_ms=config.get_int("group.min.session.timeout.ms"),
            max_session_timeout_ms=config.get_int("group.max.session.timeout.ms"),
            offsets_retention_ms=config.get_int("offsets.retention.minutes") * MINUTE_MS,
            retention_check_interval_ms=config.get_int("offsets.retention.check.interval.ms"),
            max_metadata_bytes=config.get_int("offset.metadata.max.bytes"),
        )

"""Transaction and review settings read from the broker configuration."""

from __future__ import annotations

from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.transactions.coordinator import TransactionSettings
from kshim.broker.transactions.reviewer import ReviewSettings


def transaction_settings(config: BrokerConfig) -> TransactionSettings:
    return TransactionSettings(
        max_timeout_ms=config.get_int("transaction.max.timeout.ms"),
        id_expiration_ms=config.get_int("transactional.id.expiration.ms"),
    )


def review_settings(config: BrokerConfig) -> ReviewSettings:
    return ReviewSettings(
        retry_ms=config.get_int("kshim.review.retry.ms"),
        max_reviews=config.get_int("kshim.review.max.checks"),
        check_interval_ms=config.get_int("kshim.review.check.interval.ms"),
    )

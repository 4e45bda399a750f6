"""What the admin handlers read of the broker, as Protocols the Broker satisfies
(api/services.py names each service)."""

from __future__ import annotations

from typing import Protocol

from kshim.api.services import (
    WithConfig,
    WithPartitions,
    WithResolver,
    WithTopics,
    WithTransactions,
)


class TopicServices(WithResolver, WithTopics, Protocol):
    """AlterConfigs', IncrementalAlterConfigs' and CreatePartitions': the topics named and
    the topic manager that changes them."""


class CreatesTopics(WithResolver, WithTopics, WithConfig, Protocol):
    """CreateTopics': the topic services and the configuration (the defaults and limits a
    new topic is checked against)."""


class ConfiguredTopics(WithResolver, WithConfig, Protocol):
    """DescribeConfigs': the topics named and the broker's configuration."""


class DeletesTopics(WithResolver, WithPartitions, Protocol):
    """DeleteTopics': the topics named and the partition service that drops them."""


class ProducerServices(WithResolver, WithPartitions, WithTransactions, Protocol):
    """DescribeProducers': the partitions named, their producers (the partition service)
    and their open transactions (the transaction coordinator)."""

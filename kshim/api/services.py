"""The broker's services a handler may read, one Protocol each, which Broker satisfies.

A handler's context names the few it reads (context.py): one of these, or its domain's
combination of them (``<domain>/services.py``). Each is a read-only property, so the
Broker, whose attributes these are, satisfies every combination structurally, and a test
can hand a handler those services and nothing else (tests/broker/test_handler_services.py).
"""

from __future__ import annotations

from typing import Protocol

from kshim.broker.append_waiters import AppendWaiters
from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.endpoints import Endpoints
from kshim.broker.fetch_sessions import FetchSessionCache
from kshim.broker.groups.coordinator import GroupCoordinator
from kshim.broker.partitions.service import PartitionService
from kshim.broker.refusal_log import RefusalLog
from kshim.broker.security.acls.service import Acls
from kshim.broker.security.credentials import Credentials
from kshim.broker.topic_descriptions import TopicDescriptions
from kshim.broker.topic_resolver import TopicResolver
from kshim.broker.topics import TopicManager
from kshim.broker.traffic import TopicTraffic
from kshim.broker.transactions.coordinator import TransactionCoordinator
from kshim.broker.transactions.reviewer import TransactionReviewer


class WithConfig(Protocol):
    """The broker's configuration."""

    @property
    def config(self) -> BrokerConfig: ...


class WithEndpoints(Protocol):
    """The listeners the broker advertises."""

    @property
    def endpoints(self) -> Endpoints: ...


class WithResolver(Protocol):
    """What a topic name means: a topic, its read-only view or its delay companion."""

    @property
    def resolver(self) -> TopicResolver: ...


class WithTopics(Protocol):
    """The topic manager: creates topics, adds partitions, changes configs."""

    @property
    def topics(self) -> TopicManager: ...


class WithTopicDescriptions(Protocol):
    """Each topic's Metadata entry, kept encoded."""

    @property
    def topic_descriptions(self) -> TopicDescriptions: ...


class WithPartitions(Protocol):
    """The partition service (Kafka's ReplicaManager role): appends, producer state."""

    @property
    def partitions(self) -> PartitionService: ...


class WithFetchSessions(Protocol):
    """The incremental fetch sessions (KIP-227)."""

    @property
    def fetch_sessions(self) -> FetchSessionCache: ...


class WithAppendWaiters(Protocol):
    """The long polls woken when a partition is appended to."""

    @property
    def append_waiters(self) -> AppendWaiters: ...


class WithTraffic(Protocol):
    """Records and bytes in and out per topic (the metrics)."""

    @property
    def traffic(self) -> TopicTraffic: ...


class WithRefusals(Protocol):
    """The refusal reasons logged, rate-limited."""

    @property
    def refusals(self) -> RefusalLog: ...


class WithGroups(Protocol):
    """The group coordinator: membership and committed offsets."""

    @property
    def groups(self) -> GroupCoordinator: ...


class WithTransactions(Protocol):
    """The transaction coordinator."""

    @property
    def transactions(self) -> TransactionCoordinator: ...


class WithReviewer(Protocol):
    """The review of transactions left open (broker/transactions/reviewer.py)."""

    @property
    def reviewer(self) -> TransactionReviewer: ...


class WithAcls(Protocol):
    """The ACLs and the authoriser."""

    @property
    def acls(self) -> Acls: ...


class WithCredentials(Protocol):
    """The SCRAM credentials (KIP-554)."""

    @property
    def credentials(self) -> Credentials: ...

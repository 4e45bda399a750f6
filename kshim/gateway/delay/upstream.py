"""What the dispatcher needs of the cluster: its settings, how aiokafka clients connect to
it (the gateway's ``--upstream-config``), and the transactional producer of one partition."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from aiokafka import AIOKafkaProducer

from kshim.client.security import ClientSecurity
from kshim.gateway.delay.entries import SCHEDULE_TOPIC

DEFAULT_GROUP = "kshim-gateway-delay"
DEFAULT_SESSION_TIMEOUT_MS = 10_000  # aiokafka's; Kafka's group.min.session.timeout.ms is 6 s
DELAY_TOPIC_PATTERN = r"^[^_].*\.delay$"  # a T.delay, and no X.delay.delay (filtered later)


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class DelaySettings:
    """How the gateways share and run the delayed delivery of the cluster's ``*.delay``."""

    group_id: str = DEFAULT_GROUP
    schedule_topic: str = SCHEDULE_TOPIC
    topics: tuple[str, ...] = ()  # the T.delay topics to serve; () for every one (a pattern)
    schedule_partitions: int = 16  # when the gateway creates the schedule topic
    schedule_replication: int = 0  # 0: three, or every broker of a smaller cluster
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS  # how soon a dead gateway is noticed
    heartbeat_interval_ms: int = 3_000
    metadata_max_age_ms: int = 30_000  # how soon a new T.delay is seen (with a pattern)
    delivery_records: int = 500  # delivered in one transaction at most
    transactional_id_prefix: str = "kshim-delay-"
    takeover_timeout_s: float = 60.0  # reading a schedule partition on takeover
    clock_ms: Callable[[], int] = field(default=_wall_clock_ms)


@dataclass(frozen=True, slots=True)
class Upstream:
    """The cluster: its bootstrap addresses (host:port,...) and security."""

    bootstrap: str
    security: ClientSecurity | None = None

    def options(self) -> dict[str, object]:
        """aiokafka's connection arguments for ``security``."""
        options: dict[str, object] = {"bootstrap_servers": self.bootstrap}
        if self.security is None:
            return options
        options["security_protocol"] = self.security.protocol
        context = self.security.ssl_context()
        if context is not None:
            options["ssl_context"] = context
        if self.security.mechanism is not None:
            options["sasl_mechanism"] = self.security.mechanism
            options["sasl_plain_username"] = self.security.username
            options["sasl_plain_password"] = self.security.password
        return options

    def transactional_producer(self, transactional_id: str) -> AIOKafkaProducer:
        """Not started: its start is the InitProducerId that fences the id's last user
        (KIP-98) and aborts what that one left open."""
        return AIOKafkaProducer(
            transactional_id=transactional_id,
            enable_idempotence=True,
            acks="all",
            linger_ms=0,
            **self.options(),
        )

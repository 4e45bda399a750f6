"""The merged, validated broker configuration and its typed accessors."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kshim.broker.config.keys import BROKER_DEFAULTS, TOPIC_CONFIGS, broker_validator
from kshim.broker.config.listeners import (
    Listener,
    ListenerError,
    parse_advertised,
    parse_endpoint,
    parse_listeners,
)
from kshim.broker.config.validators import ConfigError, refusal
from kshim.storage.interface import LogConfig, StoreSettings

log = logging.getLogger(__name__)


def parse_listener(listener: str) -> tuple[str, int]:
    """Checks every ``NAME://host:port`` of a listener list; returns the first's address."""
    try:
        endpoints = [parse_endpoint(part) for part in listener.split(",") if part.strip()]
    except ListenerError as error:
        raise ConfigError(str(error)) from None
    if not endpoints:
        raise ConfigError(f"listener {listener!r} is not host:port")
    _, host, port = endpoints[0]
    return host or "0.0.0.0", port


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    values: Mapping[str, str]
    explicit: frozenset[str] = frozenset()  # keys an operator set, rather than defaults

    @classmethod
    def load(cls, layers: Sequence[Mapping[str, str]]) -> BrokerConfig:
        """Merges layers over the defaults; raises ConfigError for an invalid value."""
        values = dict(BROKER_DEFAULTS)
        explicit = set()
        for layer in layers:
            for key, value in layer.items():
                validator = broker_validator(key)
                if validator is None:
                    log.warning("ignoring unknown configuration key %s", key)
                    continue
                try:
                    values[key] = validator(value)
                except ConfigError as error:
                    raise ConfigError(refusal(key, error)) from None
                explicit.add(key)
        config = cls(values, frozenset(explicit))
        try:  # fail early on a malformed listener
            config.advertised_addresses()
        except ListenerError as error:
            raise ConfigError(str(error)) from None
        return config

    def static_settings(self) -> dict[str, str]:
        """The keys the broker's configuration sets (file, environment, --set, flags), with
        their values: what Kafka calls STATIC_BROKER_CONFIG."""
        return {key: self.values[key] for key in self.explicit}

    def get_int(self, key: str) -> int:
        return int(self.values[key])

    def get_bool(self, key: str) -> bool:
        return self.values[key] == "true"

    @property
    def node_id(self) -> int:
        return self.get_int("node.id")

    @property
    def data_dir(self) -> str:
        return self.values["log.dirs"].split(",")[0].strip()

    def listeners(self) -> list[Listener]:
        """Every listener, in the order of ``listeners``."""
        return parse_listeners(
            self.values["listeners"], self.values["listener.security.protocol.map"]
        )

    def listen_address(self) -> tuple[str, int]:
        """The first listener's address."""
        first = self.listeners()[0]
        return first.host, first.port

    def advertised_addresses(self) -> dict[str, tuple[str, int]]:
        """The address clients are told to connect to, by listener name."""
        return parse_advertised(self.values["advertised.listeners"], self.listeners())

    def listener_value(self, listener: str, key: str) -> str:
        """``key`` as set for one listener (``listener.name.<listener>.<key>``), else as set
        for all (Kafka's ``ListenerName.configPrefix``)."""
        scoped = f"listener.name.{listener.lower()}.{key}"
        return self.values.get(scoped, self.values.get(key, ""))

    def metrics_address(self) -> tuple[str, int] | None:
        """Where /metrics and /healthz are served (kshim.metrics.listen), or None for
        nowhere."""
        value = self.values["kshim.metrics.listen"]
        if not value:
            return None
        host, _, port = value.rpartition(":")
        return host.strip("[]") or "0.0.0.0", int(port)

    def advertised_address(self) -> tuple[str, int]:
        """The first listener's advertised address."""
        return next(iter(self.advertised_addresses().values()))

    def topic_defaults(self) -> dict[str, str]:
        """Topic-level config values a topic without overrides gets."""
        return {name: self.values[spec.broker_key] for name, spec in TOPIC_CONFIGS.items()}

    def log_config(self, topic_configs: Mapping[str, str]) -> LogConfig:
        """The store settings for a topic, given its effective topic configs."""
        return LogConfig(
            segment_bytes=int(topic_configs["segment.bytes"]),
            segment_ms=int(topic_configs["segment.ms"]),
            retention_ms=int(topic_configs["retention.ms"]),
            retention_bytes=int(topic_configs["retention.bytes"]),
            flush_messages=int(topic_configs["flush.messages"]),
            flush_ms=int(topic_configs["flush.ms"]),
            memtable_bytes=self.get_int("kshim.memtable.bytes"),
        )

    def store_settings(self) -> StoreSettings:
        """The settings of the disk log store as a whole."""
        return StoreSettings(
            max_open_files=self.get_int("kshim.max.open.files"),
            memtable_total_bytes=self.get_int("kshim.memtable.total.bytes"),
            wal_segment_bytes=self.get_int("kshim.wal.segment.bytes"),
            checkpoint_bytes=self.get_int("kshim.wal.checkpoint.bytes"),
            checkpoint_interval_ms=self.get_int("kshim.wal.checkpoint.interval.ms"),
            inline_write_max_us=self.get_int("kshim.write.inline.max.us"),
        )

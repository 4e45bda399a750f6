"""The two brokers the conformance probes are sent to: kshim, and Apache Kafka 3.9.

Both get the same setting the probes depend on: ``group.initial.rebalance.delay.ms=0``,
so that a new group's first join completes at once on both (kshim's default is 200 ms,
K10; Kafka's 3000 ms; Kafka's own test brokers set 0, TestUtils.createBrokerConfig).
Kafka's group and transaction state topics get one partition each: a single node leads
every partition either way, and one partition is created and loaded faster. kshim also
gets the topic defaults Kafka's sample server.properties sets (``SAMPLE_TOPIC_DEFAULTS``),
so that both brokers' configurations hold them.

Kafka comes from where the compatibility suite takes it (compat_tests/kafka_sources.py):
an already running one (KSHIM_KAFKA_BOOTSTRAP, used as it is: its own settings apply), a
start command (KSHIM_KAFKA_CMD), else the pinned jars, started here with these settings.
Without any of them the differential tests skip, saying why in one line; Kafka in Docker,
the suite's last resort, is not used here (it takes a minute to start).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from compat_tests.kafka_sources import (
    BOOTSTRAP,
    COMMAND,
    JARS,
    REFERENCE_JARS,
    bootstrap_unavailable_reason,
    jars_command,
    kafka_source,
    launched,
)
from kshim.broker.config.keys import TOPIC_CONFIGS
from kshim.jvm import artifacts
from kshim.jvm.kafka_server import SAMPLE_SETTINGS

PROBE_SETTINGS = {"group.initial.rebalance.delay.ms": "0"}
KAFKA_SETTINGS = {
    **PROBE_SETTINGS,
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.num.partitions": "1",
}
# The topic defaults Kafka's sample server.properties sets under broker keys kshim has too
# (log.segment.bytes, to its default value): static broker configuration there, which
# CreateTopics and DescribeConfigs report as such; kshim gets the same, so that both say
# STATIC_BROKER_CONFIG. (Its log.retention.hours is no kshim key: kshim sets retention by
# log.retention.ms alone.)
SAMPLE_TOPIC_DEFAULTS = {
    spec.broker_key: SAMPLE_SETTINGS[spec.broker_key]
    for spec in TOPIC_CONFIGS.values()
    if spec.broker_key in SAMPLE_SETTINGS
}
KSHIM_SETTINGS = tuple(
    f"{key}={value}" for key, value in {**PROBE_SETTINGS, **SAMPLE_TOPIC_DEFAULTS}.items()
)


def kafka_unavailable_reason() -> str | None:
    """Why no reference Kafka can be had here (one line), or None."""
    source = kafka_source()
    if source.kind == BOOTSTRAP:
        return bootstrap_unavailable_reason(source.value)
    if source.kind in (COMMAND, JARS):
        return None
    reason = artifacts.unavailable_reason(REFERENCE_JARS)
    return f"no Apache Kafka 3.9 to compare with: {reason or 'the jars are not cached'}"


@contextlib.contextmanager
def reference_kafka() -> Iterator[str]:
    """A running Kafka's bootstrap address until the block ends; call only when
    ``kafka_unavailable_reason()`` is None. An already running Kafka is left running."""
    source = kafka_source()
    if source.kind == BOOTSTRAP:
        yield source.value
        return
    if source.kind == JARS:
        artifacts.resolve(source.value)  # fetched before the start timeout runs
        template = jars_command(source.value, KAFKA_SETTINGS)
    else:
        template = source.value
    with launched(template) as kafka:
        yield kafka.bootstrap

"""Broker and topic configuration, under Kafka's own key names.

Sources, later ones winning: built-in defaults, ``--config FILE`` (Java
properties syntax), ``KSHIM_*`` environment variables (``KSHIM_LOG_RETENTION_MS``
sets ``log.retention.ms``), repeated ``--set KEY=VALUE``, then the
``--listen`` / ``--data-dir`` flags. Topic-level keys default to their broker
key (``retention.ms`` from ``log.retention.ms``) and are stored per topic.

Values are read with Kafka's syntax (values.py) and refused in its words: a validator
raises InvalidValue with Kafka's reason, and ``refusal`` words it as Kafka's
ConfigException does, "Invalid value soon for configuration retention.ms: Not a number of
type LONG", for CreateTopics, the config APIs and the broker's own start-up alike.

A key kshim does not know is warned of and ignored, not refused: Kafka too logs the
configurations "supplied but are not used yet" and starts, and Kafka tools and
``server.properties`` files carry keys that mean nothing to a single-node broker.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kshim.broker.config import validators
from kshim.broker.config.security_keys import (
    SECURITY_DEFAULTS,
    SecurityConfigError,
    security_validator,
)
from kshim.broker.config.validators import (
    INT_MAX,
    LONG_MAX,
    VALUE_RULES,
    ConfigError,
)
from kshim.client.java_properties import java_properties_entries

ENVIRONMENT_PREFIX = "KSHIM_"


@dataclass(frozen=True, slots=True)
class TopicConfigSpec:
    broker_key: str  # the broker-level key that supplies the default
    validate: Callable[[str], str]
    # DescribeConfigs ConfigType: 1 BOOLEAN 2 STRING 3 INT 4 SHORT 5 LONG 6 DOUBLE 7 LIST
    config_type: int


BOOLEAN, STRING, INT, LONG, DOUBLE, LIST = 1, 2, 3, 5, 6, 7

# In the order Kafka's LogConfig defines them, which is the order it checks the values of
# a request in: with several bad values, the first here is the one refused.
TOPIC_CONFIGS: dict[str, TopicConfigSpec] = {
    "segment.bytes": TopicConfigSpec("log.segment.bytes", validators.integer(14, INT_MAX), INT),
    "segment.ms": TopicConfigSpec("log.roll.ms", validators.integer(1), LONG),
    "flush.messages": TopicConfigSpec("log.flush.interval.messages", validators.integer(1), LONG),
    "flush.ms": TopicConfigSpec("log.flush.interval.ms", validators.integer(0), LONG),
    "retention.bytes": TopicConfigSpec("log.retention.bytes", validators.integer(-1), LONG),
    "retention.ms": TopicConfigSpec("log.retention.ms", validators.integer(-1), LONG),
    "max.message.bytes": TopicConfigSpec("message.max.bytes", validators.integer(0, INT_MAX), INT),
    "delete.retention.ms": TopicConfigSpec(
        "log.cleaner.delete.retention.ms", validators.integer(0), LONG
    ),
    # Log compaction (cleanup.policy=compact): broker/log_cleaner.py, storage/compaction.py.
    "min.compaction.lag.ms": TopicConfigSpec(
        "log.cleaner.min.compaction.lag.ms", validators.integer(0), LONG
    ),
    "max.compaction.lag.ms": TopicConfigSpec(
        "log.cleaner.max.compaction.lag.ms", validators.integer(1), LONG
    ),
    "min.cleanable.dirty.ratio": TopicConfigSpec(
        "log.cleaner.min.cleanable.ratio", validators.ratio, DOUBLE
    ),
    "cleanup.policy": TopicConfigSpec("log.cleanup.policy", validators.cleanup_policy, LIST),
    "min.insync.replicas": TopicConfigSpec("min.insync.replicas", validators.integer(1, 1), INT),
    "compression.type": TopicConfigSpec("compression.type", validators.choice("producer"), STRING),
    "message.timestamp.type": TopicConfigSpec(
        "log.message.timestamp.type", validators.choice("CreateTime", "LogAppendTime"), STRING
    ),
    "message.timestamp.before.max.ms": TopicConfigSpec(
        "log.message.timestamp.before.max.ms", validators.integer(0), LONG
    ),
    "message.timestamp.after.max.ms": TopicConfigSpec(
        "log.message.timestamp.after.max.ms", validators.integer(0), LONG
    ),
    "kshim.full.view": TopicConfigSpec("kshim.full.view", validators.boolean, BOOLEAN),
}

BROKER_DEFAULTS: dict[str, str] = {
    "node.id": "1",
    "listeners": "PLAINTEXT://127.0.0.1:9092",
    "advertised.listeners": "",
    "log.dirs": "./kshim-data",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "auto.create.topics.enable": "true",
    "log.cleanup.policy": "delete",
    "log.retention.ms": str(7 * 24 * 3600 * 1000),
    "log.retention.bytes": "-1",
    "log.segment.bytes": str(1 << 30),
    "log.roll.ms": str(7 * 24 * 3600 * 1000),
    "log.retention.check.interval.ms": "300000",
    "message.max.bytes": "1048588",
    "log.message.timestamp.type": "CreateTime",
    "log.message.timestamp.before.max.ms": str(LONG_MAX),
    "log.message.timestamp.after.max.ms": str(LONG_MAX),
    # kshim acknowledges only what is fsynced; larger values trade that safety for speed.
    "log.flush.interval.messages": "1",
    "log.flush.interval.ms": "0",
    "log.cleaner.delete.retention.ms": "86400000",
    # Log compaction, Kafka's defaults: a pass once half a log's cleanable bytes are dirty,
    # a look for one every 15 s when the last found nothing, and a key map of 128 MiB (in
    # Python about 900,000 keys: a log with more distinct dirty keys takes several passes).
    "log.cleaner.enable": "true",
    "log.cleaner.min.cleanable.ratio": "0.5",
    "log.cleaner.min.compaction.lag.ms": "0",
    "log.cleaner.max.compaction.lag.ms": str(LONG_MAX),
    "log.cleaner.backoff.ms": "15000",
    "log.cleaner.dedupe.buffer.size": str(128 << 20),
    "compression.type": "producer",
    "min.insync.replicas": "1",
    "kshim.full.view": "true",
    # Per partition, the newest batches kept in memory for tailing readers; older ones are
    # sent from the page cache with sendfile, so a larger tail buys little and costs RSS for
    # every backlogged byte (LSMQ's accumulation test, benchmarks/accumulation.py).
    "kshim.memtable.bytes": str(1 << 20),
    # Flush rounds (write plus fsync) faster than this on average run on the event loop: a
    # thread hand-off costs more CPU than a fast disk's fsync. SSDs and virtual disks stay
    # under it (this VM's disk averages 1-3 ms per fsync at low rates); a spinning disk gets
    # a worker thread so the loop keeps serving while it waits. 0 = always a worker thread.
    "kshim.write.inline.max.us": "5000",
    # Every partition's appends are made durable through one write-ahead log (one fsync per
    # flush round, however many partitions it covers), spilled to per-partition segment files
    # later: see kshim/storage/log/checkpointer.py. Descriptors of segment and index files the
    # store keeps open, least recently used closed first (the process also holds one per
    # connection, and a few for LMDB and the write-ahead log).
    "kshim.max.open.files": "128",
    # All partitions' memtables together; the least recently appended give way first.
    "kshim.memtable.total.bytes": str(32 << 20),
    "kshim.wal.segment.bytes": str(64 << 20),
    # A checkpoint (segment files synced, the write-ahead log before it deleted) after this
    # much log or this long: recovery after a crash replays at most about that much.
    "kshim.wal.checkpoint.bytes": str(32 << 20),
    "kshim.wal.checkpoint.interval.ms": "5000",
    # The full-data views are applied in a child process (decoding and LMDB writes then never
    # hold the broker's GIL); false applies them in worker threads of the broker process.
    "kshim.full.view.process": "true",
    # Delayed delivery (T.delay): how far ahead a record may be due; two years, as QMQ.
    "kshim.delay.max.ms": str(2 * 365 * 24 * 3600 * 1000),
    # The event loop the broker runs on: uvloop (libuv, its loop machinery and transports in
    # C) takes about a quarter less CPU per request than asyncio's own selector loop
    # (python -m benchmarks.event_loops); "asyncio" is the fallback where uvloop is missing.
    "kshim.event.loop": "uvloop",
    # Prometheus metrics (/metrics) and a readiness answer (/healthz) over HTTP; empty for
    # none. The default address, when already in use (another broker on the machine), is
    # skipped with a warning; an address set by the operator must be bound.
    "kshim.metrics.listen": "127.0.0.1:9308",
    # Alarms (kshim/broker/alarms/): checked every interval; a threshold of 0 turns its
    # check off. The webhook, when set, receives each alarm as a JSON POST.
    "kshim.alarm.webhook": "",
    "kshim.alarm.webhook.timeout.ms": "5000",
    "kshim.alarm.webhook.retries": "3",
    "kshim.alarm.check.interval.ms": "10000",
    "kshim.alarm.group.lag.records": "100000",
    "kshim.alarm.group.lag.duration.ms": "300000",
    "kshim.alarm.view.lag.records": "100000",
    "kshim.alarm.view.lag.duration.ms": "60000",
    "kshim.alarm.disk.free.bytes": str(1 << 30),
    "kshim.alarm.fsync.p99.ms": "1000",
    "socket.request.max.bytes": "104857600",
    # Bytes of requests read and not yet handled, all connections together; a connection
    # waits for room before reading a request's body (server/request_budget.py). Kafka's
    # default, -1, sets no bound: a flood of large produce requests then grows the
    # broker's memory until it dies. 100 MiB holds one request of socket.request.max.bytes,
    # or a hundred of a producer's default max.request.size (1 MiB): more than two cores
    # can handle at once, little next to the memory of any machine the broker runs on.
    "queued.max.request.bytes": str(100 << 20),
    # Incremental fetch sessions (KIP-227) kept at once; 0 for none (broker/fetch_sessions.py).
    "max.incremental.fetch.session.cache.slots": "1000",
    "max.connections": "10000",
    # Kafka's default: a connection that has read nothing and has nothing being answered for
    # this long is closed (server/idle_connections.py); a negative value never closes one.
    "connections.max.idle.ms": "600000",
    "cluster.id": "kshim-cluster",
    "transaction.max.timeout.ms": "900000",
    "transactional.id.expiration.ms": "604800000",
    "producer.id.expiration.ms": "86400000",
    # Half-message review (see broker/transactions/reviewer.py): module:function or http(s) URL.
    "kshim.review.hook": "",
    "kshim.review.retry.ms": "30000",
    "kshim.review.max.checks": "15",
    "kshim.review.check.interval.ms": "1000",
    # Consumer groups (Kafka's GroupCoordinatorConfig names). Kafka waits 3000 ms before the
    # first rebalance of an empty group; a short wait keeps a lone consumer's start fast.
    "group.initial.rebalance.delay.ms": "200",
    "group.min.session.timeout.ms": "6000",
    "group.max.session.timeout.ms": "1800000",
    "offsets.retention.minutes": "10080",
    "offsets.retention.check.interval.ms": "600000",
    "offset.metadata.max.bytes": "4096",
    **SECURITY_DEFAULTS,
}

_BROKER_VALIDATORS: dict[str, Callable[[str], str]] = {
    "node.id": validators.integer(0, INT_MAX),
    "num.partitions": validators.integer(1, 100000),
    "default.replication.factor": validators.integer(1, 1),
    "auto.create.topics.enable": validators.boolean,
    "socket.request.max.bytes": validators.integer(1024, INT_MAX),
    "queued.max.request.bytes": validators.integer(
        -1, LONG_MAX
    ),  # -1 (or 0): no bound, as in Kafka
    "max.connections": validators.integer(1, INT_MAX),
    "connections.max.idle.ms": validators.integer(-1, LONG_MAX),
    "max.incremental.fetch.session.cache.slots": validators.integer(0, INT_MAX),
    "log.retention.check.interval.ms": validators.integer(1),
    "log.cleaner.enable": validators.boolean,
    "log.cleaner.backoff.ms": validators.integer(1),
    "log.cleaner.dedupe.buffer.size": validators.integer(1 << 10),
    "kshim.memtable.bytes": validators.integer(0),
    "kshim.write.inline.max.us": validators.integer(0),
    "kshim.max.open.files": validators.integer(8, INT_MAX),
    "kshim.memtable.total.bytes": validators.integer(0),
    "kshim.wal.segment.bytes": validators.integer(1 << 16, 1 << 40),
    "kshim.wal.checkpoint.bytes": validators.integer(1),
    "kshim.wal.checkpoint.interval.ms": validators.integer(1),
    "kshim.full.view.process": validators.boolean,
    "kshim.delay.max.ms": validators.integer(0, 100 * 365 * 24 * 3600 * 1000),  # up to a century
    "kshim.event.loop": validators.choice("uvloop", "asyncio"),
    "kshim.metrics.listen": validators.optional_address,
    "kshim.alarm.webhook": validators.optional_http_url,
    "kshim.alarm.webhook.timeout.ms": validators.integer(1, INT_MAX),
    "kshim.alarm.webhook.retries": validators.integer(0, 100),
    "kshim.alarm.check.interval.ms": validators.integer(1, INT_MAX),
    "kshim.alarm.group.lag.records": validators.integer(0),
    "kshim.alarm.group.lag.duration.ms": validators.integer(0),
    "kshim.alarm.view.lag.records": validators.integer(0),
    "kshim.alarm.view.lag.duration.ms": validators.integer(0),
    "kshim.alarm.disk.free.bytes": validators.integer(0),
    "kshim.alarm.fsync.p99.ms": validators.integer(0),
    "transaction.max.timeout.ms": validators.integer(1, INT_MAX),
    "transactional.id.expiration.ms": validators.integer(1, INT_MAX),
    "producer.id.expiration.ms": validators.integer(1, INT_MAX),
    "kshim.review.retry.ms": validators.integer(1),
    "kshim.review.max.checks": validators.integer(1, INT_MAX),
    "kshim.review.check.interval.ms": validators.integer(1),
    "group.initial.rebalance.delay.ms": validators.integer(0, INT_MAX),
    "group.min.session.timeout.ms": validators.integer(1, INT_MAX),
    "group.max.session.timeout.ms": validators.integer(1, INT_MAX),
    "offsets.retention.minutes": validators.integer(1, INT_MAX),
    "offsets.retention.check.interval.ms": validators.integer(1),
    "offset.metadata.max.bytes": validators.integer(0, INT_MAX),
}


def parse_properties(text: str) -> dict[str, str]:
    """Parses a broker's properties file in Java's full syntax, as Kafka reads
    server.properties (java.util.Properties.load: ``key=value``, ``key: value`` or
    ``key value``, comments, continuation lines, escapes). Raises ConfigError, with the
    line number, for an entry without a key (``=value``), which Java would store under
    the empty key and Kafka then ignore."""
    result = {}
    for number, key, value in java_properties_entries(text):
        if not key:
            raise ConfigError(f"line {number}: expected key=value, got an entry without a key")
        result[key] = value
    return result


# Variables of kshim's own test, benchmark and example tooling: they share the prefix but
# configure no broker, so a broker started from a shell that sets them says nothing of them.
TOOLING_VARIABLES = frozenset(
    {
        "KSHIM_BASELINE_DIR",
        "KSHIM_CAPTURE_REGISTRY",
        "KSHIM_COMPAT_BROKERS",
        "KSHIM_COMPAT_OUTCOMES",
        "KSHIM_INTENDED_DIFFERENCES",
        "KSHIM_KAFKA_BOOTSTRAP",
        "KSHIM_KAFKA_CMD",
        "KSHIM_REUSE_VENV",
        "KSHIM_SPARK_JARS",
    }
)


def environment_keys(environment: Mapping[str, str]) -> dict[str, str]:
    """The configuration key each ``KSHIM_*`` variable names, by variable name:
    ``{"KSHIM_LOG_RETENTION_MS": "log.retention.ms"}``, known keys or not. Variables of
    kshim's own tooling (TOOLING_VARIABLES) and the bare prefix name no key."""
    return {
        name: name[len(ENVIRONMENT_PREFIX) :].lower().replace("_", ".")
        for name in environment
        if name.startswith(ENVIRONMENT_PREFIX)
        and name != ENVIRONMENT_PREFIX
        and name not in TOOLING_VARIABLES
    }


def from_environment(environment: Mapping[str, str]) -> dict[str, str]:
    """Maps ``KSHIM_LOG_RETENTION_MS=5`` to ``{"log.retention.ms": "5"}``.

    Only variables naming a known key count: the command line warns of the others
    (``environment_keys`` lists them all), and a library caller gets known keys only.
    """
    return {
        key: environment[name]
        for name, key in environment_keys(environment).items()
        if is_known_key(key)
    }


def is_known_key(key: str) -> bool:
    """Whether kshim knows broker key ``key`` (one it uses, or a topic key's default)."""
    return broker_validator(key) is not None


def _as_config_error(validate: Callable[[str], str]) -> Callable[[str], str]:
    def check(value: str) -> str:
        try:
            return validate(value)
        except SecurityConfigError as error:
            raise ConfigError(str(error)) from None

    return check


def broker_validator(key: str) -> Callable[[str], str] | None:
    """The validator of a broker key, or None if kshim does not know the key."""
    if key in _BROKER_VALIDATORS:
        return _BROKER_VALIDATORS[key]
    security = security_validator(key)
    if security is not None:
        return _as_config_error(security)
    for spec in TOPIC_CONFIGS.values():
        if spec.broker_key == key:
            return spec.validate
    return validators.any_string if key in BROKER_DEFAULTS else None


def value_rule(key: str) -> str | None:
    """What broker key ``key`` accepts, in words, or None when no rule is written down
    (security keys, checked by security_keys.py)."""
    validator = broker_validator(key)
    return None if validator is None else VALUE_RULES.get(validator)

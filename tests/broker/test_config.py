"""Configuration: properties parsing, KSHIM_* variables, validation, typed accessors."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from kshim.broker.config.broker_config import BrokerConfig, parse_listener
from kshim.broker.config.keys import (
    BROKER_DEFAULTS,
    TOPIC_CONFIGS,
    broker_validator,
    from_environment,
    parse_properties,
)
from kshim.broker.config.validators import INT_MAX, LONG_MAX, ConfigError
from kshim.cli.config_sources import load_config
from kshim.cli.main import build_parser
from kshim.storage.interface import LogConfig


def test_parse_properties() -> None:
    text = """
    # a comment
    log.retention.ms=1000
      num.partitions : 3
    listeners=PLAINTEXT://0.0.0.0:9092
    advertised.listeners=
    cluster.id = a=b
    """
    assert parse_properties(text) == {
        "log.retention.ms": "1000",
        "num.partitions": "3",
        "listeners": "PLAINTEXT://0.0.0.0:9092",
        "advertised.listeners": "",
        "cluster.id": "a=b",
    }


def test_parse_properties_later_lines_win() -> None:
    assert parse_properties("a=1\na=2") == {"a": "2"}
    assert parse_properties("") == {}


def test_parse_properties_reads_java_syntax_in_full() -> None:
    """Kafka reads server.properties with java.util.Properties.load: a blank separates key
    from value, a trailing backslash continues the line, escapes stand for characters."""
    text = (
        "log.retention.ms 1000\n"
        "! also a comment\n"
        "listeners = PLAINTEXT://127.0.0.1:9092,\\\n"
        "             SSL://127.0.0.1:9093\n"
        "sasl.enabled.mechanisms\tPLAIN\n"
        "kshim.note=caf\\u00e9 a\\=b\n"
        "advertised.listeners\n"
    )
    assert parse_properties(text) == {
        "log.retention.ms": "1000",
        "listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093",
        "sasl.enabled.mechanisms": "PLAIN",
        "kshim.note": "café a=b",
        "advertised.listeners": "",
    }


@pytest.mark.parametrize(("text", "line"), [("=1", 1), ("a=1\n=2", 2), ("a=1\n\n :x", 3)])
def test_parse_properties_refuses_a_line_without_key(text: str, line: int) -> None:
    with pytest.raises(ConfigError, match=f"line {line}"):
        parse_properties(text)


def test_environment_variables_map_to_dotted_keys() -> None:
    environment = {
        "KSHIM_LOG_RETENTION_MS": "5",
        "KSHIM_NUM_PARTITIONS": "4",
        "KSHIM_KSHIM_MEMTABLE_BYTES": "0",
        "KSHIM_": "ignored",
        "HOME": "/root",
        "kshim_log_retention_ms": "lowercase is not ours",
    }
    assert from_environment(environment) == {
        "log.retention.ms": "5",
        "num.partitions": "4",
        "kshim.memtable.bytes": "0",
    }


def test_every_default_passes_its_own_validator() -> None:
    for key, value in BROKER_DEFAULTS.items():
        validator = broker_validator(key)
        assert validator is not None, key
        assert validator(value) == value, key


def test_every_topic_config_has_a_broker_default() -> None:
    for name, spec in TOPIC_CONFIGS.items():
        assert spec.broker_key in BROKER_DEFAULTS, name
        assert spec.validate(BROKER_DEFAULTS[spec.broker_key]) == BROKER_DEFAULTS[spec.broker_key]


def test_unknown_key_has_no_validator() -> None:
    assert broker_validator("no.such.key") is None
    assert broker_validator("retention.ms") is None  # the topic name, not the broker key


@pytest.mark.parametrize(
    ("key", "value", "normalized"),
    [
        ("log.retention.ms", " -1 ", "-1"),
        ("log.retention.ms", str(LONG_MAX), str(LONG_MAX)),
        ("log.segment.bytes", "14", "14"),
        ("log.segment.bytes", str(INT_MAX), str(INT_MAX)),
        ("num.partitions", "100000", "100000"),
        ("auto.create.topics.enable", "TRUE", "true"),
        ("auto.create.topics.enable", " False ", "false"),
        ("log.cleanup.policy", "compact, delete", "compact,delete"),
        ("log.message.timestamp.type", "LogAppendTime", "LogAppendTime"),
        ("kshim.memtable.bytes", "0", "0"),
        ("kshim.event.loop", "asyncio", "asyncio"),
        ("log.dirs", "/var/kshim", "/var/kshim"),
    ],
)
def test_valid_values_are_normalized(key: str, value: str, normalized: str) -> None:
    validator = broker_validator(key)
    assert validator is not None
    assert validator(value) == normalized


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("log.retention.ms", "-2"),
        ("log.retention.ms", "ten"),
        ("log.retention.ms", "1.5"),
        ("log.retention.ms", str(LONG_MAX + 1)),
        ("log.segment.bytes", "13"),
        ("log.segment.bytes", str(INT_MAX + 1)),
        ("log.roll.ms", "0"),
        ("num.partitions", "0"),
        ("default.replication.factor", "3"),
        ("min.insync.replicas", "2"),
        ("auto.create.topics.enable", "yes"),
        ("log.cleanup.policy", "delete,archive"),
        ("log.cleanup.policy", " , "),
        ("log.message.timestamp.type", "logappendtime"),
        ("compression.type", "gzip"),
        ("socket.request.max.bytes", "1023"),
        ("log.flush.interval.messages", "0"),
        ("kshim.event.loop", "tokio"),
        ("kshim.event.loop", "UVLOOP"),
    ],
)
def test_invalid_values_are_refused(key: str, value: str) -> None:
    validator = broker_validator(key)
    assert validator is not None
    with pytest.raises(ConfigError):
        validator(value)


def test_load_uses_defaults() -> None:
    config = BrokerConfig.load([])
    assert dict(config.values) == BROKER_DEFAULTS
    assert config.node_id == 1
    assert config.listen_address() == ("127.0.0.1", 9092)
    assert config.data_dir == "./kshim-data"
    assert config.get_bool("auto.create.topics.enable") is True


def test_later_layers_win() -> None:
    config = BrokerConfig.load(
        [
            {"log.retention.ms": "1", "num.partitions": "2"},
            {"log.retention.ms": "3"},
            {"auto.create.topics.enable": "FALSE"},
        ]
    )
    assert config.get_int("log.retention.ms") == 3
    assert config.get_int("num.partitions") == 2
    assert config.get_bool("auto.create.topics.enable") is False


def test_load_refuses_an_invalid_value_naming_the_key() -> None:
    with pytest.raises(ConfigError) as refused:
        BrokerConfig.load([{"num.partitions": "-5"}])
    assert str(refused.value) == (
        "Invalid value -5 for configuration num.partitions: Value must be at least 1"
    )


def test_load_ignores_unknown_keys_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        config = BrokerConfig.load([{"made.up.key": "1", "node.id": "7"}])
    assert "made.up.key" not in config.values
    assert config.node_id == 7
    assert "made.up.key" in caplog.text


def test_load_refuses_a_malformed_listener() -> None:
    with pytest.raises(ConfigError):
        BrokerConfig.load([{"listeners": "PLAINTEXT://nohost"}])


@pytest.mark.parametrize(
    ("listener", "address"),
    [
        ("PLAINTEXT://localhost:9092", ("localhost", 9092)),
        ("plaintext://10.0.0.1:19092", ("10.0.0.1", 19092)),
        ("127.0.0.1:1234", ("127.0.0.1", 1234)),
        ("PLAINTEXT://[::1]:9093", ("::1", 9093)),
        ("PLAINTEXT://:9092", ("0.0.0.0", 9092)),
        ("PLAINTEXT://a:1,PLAINTEXT://b:2", ("a", 1)),
    ],
)
def test_parse_listener(listener: str, address: tuple[str, int]) -> None:
    assert parse_listener(listener) == address


@pytest.mark.parametrize("listener", ["SSL://host", "host", "host:", "host:port", ""])
def test_parse_listener_refuses(listener: str) -> None:
    with pytest.raises(ConfigError):
        parse_listener(listener)


def test_advertised_address() -> None:
    assert BrokerConfig.load([]).advertised_address() == ("127.0.0.1", 9092)
    wildcard = BrokerConfig.load([{"listeners": "PLAINTEXT://0.0.0.0:9000"}])
    assert wildcard.listen_address() == ("0.0.0.0", 9000)
    assert wildcard.advertised_address() == ("127.0.0.1", 9000)
    explicit = BrokerConfig.load([{"advertised.listeners": "PLAINTEXT://kafka.example:29092"}])
    assert explicit.advertised_address() == ("kafka.example", 29092)


def test_data_dir_is_the_first_log_dir() -> None:
    assert BrokerConfig.load([{"log.dirs": " /a , /b"}]).data_dir == "/a"


def test_topic_defaults_come_from_broker_keys() -> None:
    config = BrokerConfig.load(
        [{"log.retention.ms": "60000", "log.roll.ms": "1000", "log.segment.bytes": "4096"}]
    )
    defaults = config.topic_defaults()
    assert set(defaults) == set(TOPIC_CONFIGS)
    assert defaults["retention.ms"] == "60000"
    assert defaults["segment.ms"] == "1000"
    assert defaults["segment.bytes"] == "4096"
    assert defaults["flush.messages"] == "1"


def test_log_config_from_topic_configs() -> None:
    config = BrokerConfig.load([{"kshim.memtable.bytes": "1024"}])
    topic = {
        **config.topic_defaults(),
        "retention.ms": "-1",
        "retention.bytes": "1000000",
        "flush.messages": "10",
        "flush.ms": "500",
    }
    assert config.log_config(topic) == LogConfig(
        segment_bytes=1 << 30,
        segment_ms=7 * 24 * 3600 * 1000,
        retention_ms=-1,
        retention_bytes=1000000,
        flush_messages=10,
        flush_ms=500,
        memtable_bytes=1024,
    )


def test_precedence_file_environment_set_flags(tmp_path: Path) -> None:
    """defaults < --config file < KSHIM_* < --set < --listen/--data-dir."""
    properties = tmp_path / "server.properties"
    properties.write_text(
        "log.retention.ms=1\nnum.partitions=2\nnode.id=3\nlog.dirs=/from-file\n"
        "listeners=PLAINTEXT://127.0.0.1:1111\n"
    )
    arguments = build_parser().parse_args(
        [
            "serve",
            "--config",
            str(properties),
            "--set",
            "num.partitions=6",
            "--set",
            "log.roll.ms=99",
            "--data-dir",
            "/from-flag",
        ]
    )
    environment = {"KSHIM_NUM_PARTITIONS": "5", "KSHIM_NODE_ID": "4", "PATH": "/bin"}
    config = load_config(arguments, environment)
    assert config.get_int("log.retention.ms") == 1  # file only
    assert config.node_id == 4  # environment over file
    assert config.get_int("num.partitions") == 6  # --set over environment
    assert config.get_int("log.roll.ms") == 99
    assert config.data_dir == "/from-flag"  # flag over file
    assert config.listen_address() == ("127.0.0.1", 1111)  # no --listen: the file's


def test_environment_value_is_validated() -> None:
    arguments = build_parser().parse_args(["serve"])
    with pytest.raises(ConfigError, match=r"log\.retention\.ms"):
        load_config(arguments, {"KSHIM_LOG_RETENTION_MS": "soon"})


def test_metrics_are_served_on_loopback_by_default() -> None:
    assert BrokerConfig.load([]).metrics_address() == ("127.0.0.1", 9308)


@pytest.mark.parametrize(
    ("value", "address"),
    [("", None), ("0.0.0.0:9400", ("0.0.0.0", 9400)), (":0", ("0.0.0.0", 0)),
     ("[::1]:9308", ("::1", 9308))],
)  # fmt: skip
def test_metrics_address(value: str, address: tuple[str, int] | None) -> None:
    config = BrokerConfig.load([{"kshim.metrics.listen": value}])
    assert config.metrics_address() == address


@pytest.mark.parametrize("value", ["9308", "localhost:", "host:port", "127.0.0.1:65536"])
def test_a_metrics_address_that_is_not_host_port_is_refused(value: str) -> None:
    with pytest.raises(ConfigError, match="host:port"):
        BrokerConfig.load([{"kshim.metrics.listen": value}])

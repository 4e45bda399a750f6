"""Config descriptions shared by DescribeConfigs and CreateTopics (v5+)."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from kshim.broker.config.keys import BROKER_DEFAULTS, TOPIC_CONFIGS
from kshim.broker.config.topic_configs import TopicConfigs
from kshim.protocol.messages.create_topics import CreatableTopicConfigs
from kshim.protocol.messages.describe_configs import (
    DescribeConfigsResourceResult,
    DescribeConfigsSynonym,
)

# DescribeConfigs ConfigSource values (DescribeConfigsResponse.json).
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
STRING_TYPE = 2
NOTHING_SET: Mapping[str, str] = {}


def describe_topic_configs(
    configs: TopicConfigs,
    only: Collection[str] | None,
    synonyms: bool = True,
    static: Mapping[str, str] = NOTHING_SET,
) -> list[DescribeConfigsResourceResult]:
    """Describes a topic's effective configs, ``only`` the named ones when given, each with
    its synonyms when ``synonyms`` (DescribeConfigs v1+ sends them when asked). ``static``:
    the broker keys the broker's configuration sets, with their values (BrokerConfig's
    ``static_settings``)."""
    described = []
    for name, value in sorted(configs.values.items()):
        if only is not None and name not in only:
            continue
        found = config_synonyms(name, value, configs, static)
        described.append(
            DescribeConfigsResourceResult(
                name=name,
                value=value,
                read_only=configs.read_only,
                config_source=found[0].source,
                is_sensitive=False,
                synonyms=found if synonyms else [],
                config_type=TOPIC_CONFIGS[name].config_type,
                documentation=None,
            )
        )
    return described


def config_synonyms(
    name: str, value: str, configs: TopicConfigs, static: Mapping[str, str]
) -> list[DescribeConfigsSynonym]:
    """Where topic config ``name`` may take its value from, the one in force first, as
    Kafka's ConfigHelper lists them: the topic's own setting, then its broker key as the
    broker's configuration sets it (STATIC_BROKER_CONFIG), then that key's default."""
    broker_key = TOPIC_CONFIGS[name].broker_key
    found = []
    if name in configs.overridden:
        found.append(DescribeConfigsSynonym(name=name, value=value, source=DYNAMIC_TOPIC_CONFIG))
    if broker_key in static:
        found.append(
            DescribeConfigsSynonym(
                name=broker_key, value=static[broker_key], source=STATIC_BROKER_CONFIG
            )
        )
    default = BROKER_DEFAULTS[broker_key]
    found.append(DescribeConfigsSynonym(name=broker_key, value=default, source=DEFAULT_CONFIG))
    return found


def describe_created_topic_configs(
    configs: TopicConfigs, static: Mapping[str, str] = NOTHING_SET
) -> list[CreatableTopicConfigs]:
    """What CreateTopics v5+ says of each config of a new topic: DescribeConfigs' answer
    without its synonyms, type and documentation."""
    return [
        CreatableTopicConfigs(
            name=config.name,
            value=config.value,
            read_only=config.read_only,
            config_source=config.config_source,
            is_sensitive=config.is_sensitive,
        )
        for config in describe_topic_configs(configs, None, synonyms=False, static=static)
    ]


def is_sensitive(name: str) -> bool:
    """Whether a broker key holds a secret: Kafka's PASSWORD-typed keys (key and store
    passwords, an inline private key) and JAAS options (they carry PLAIN users' passwords),
    for every listener too. DescribeConfigs gives their values as null (KIP-226)."""
    return name.endswith((".password", "sasl.jaas.config", "ssl.keystore.key"))


def describe_broker_configs(
    values: Mapping[str, str], only: Collection[str] | None
) -> list[DescribeConfigsResourceResult]:
    """Describes the broker's static configuration (read-only at run time), secrets as
    null."""
    return [
        DescribeConfigsResourceResult(
            name=name,
            value=None if is_sensitive(name) else value,
            read_only=True,
            config_source=STATIC_BROKER_CONFIG,
            is_sensitive=is_sensitive(name),
            synonyms=[],
            config_type=STRING_TYPE,
            documentation=None,
        )
        for name, value in sorted(values.items())
        if only is None or name in only
    ]

"""Config descriptions shared by DescribeConfigs and CreateTopics (v5+)."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from kshim.broker.config.keys import TOPIC_CONFIGS
from kshim.broker.topic_resolver import TopicConfigs
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


def describe_topic_configs(
    configs: TopicConfigs, only: Collection[str] | None, synonyms: bool = True
) -> list[DescribeConfigsResourceResult]:
    """Describes a topic's effective configs, ``only`` the named ones when given, each with
    itself as its one synonym when ``synonyms`` (DescribeConfigs v1+ sends them when asked)."""
    described = []
    for name, value in sorted(configs.values.items()):
        if only is not None and name not in only:
            continue
        source = DYNAMIC_TOPIC_CONFIG if name in configs.overridden else DEFAULT_CONFIG
        itself = [DescribeConfigsSynonym(name=name, value=value, source=source)]
        described.append(
            DescribeConfigsResourceResult(
                name=name,
                value=value,
                read_only=configs.read_only,
                config_source=source,
                is_sensitive=False,
                synonyms=itself if synonyms else [],
                config_type=TOPIC_CONFIGS[name].config_type,
                documentation=None,
            )
        )
    return described


def describe_created_topic_configs(configs: TopicConfigs) -> list[CreatableTopicConfigs]:
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
        for config in describe_topic_configs(configs, None, synonyms=False)
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

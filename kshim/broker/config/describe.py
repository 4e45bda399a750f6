"""Config descriptions shared by DescribeConfigs and CreateTopics (v5+)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from kshim.broker.config.keys import TOPIC_CONFIGS

# DescribeConfigs ConfigSource values (DescribeConfigsResponse.json).
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
STRING_TYPE = 2


def describe_topic_configs(
    configs: Mapping[str, str],
    overridden: Collection[str],
    only: Collection[str] | None,
    read_only: bool = False,
) -> list[dict[str, Any]]:
    """Describes a topic's effective configs, ``only`` the named ones when given."""
    described = []
    for name, value in sorted(configs.items()):
        if only is not None and name not in only:
            continue
        source = DYNAMIC_TOPIC_CONFIG if name in overridden else DEFAULT_CONFIG
        described.append(
            {
                "name": name,
                "value": value,
                "read_only": read_only,
                "config_source": source,
                "is_sensitive": False,
                "synonyms": [{"name": name, "value": value, "source": source}],
                "config_type": TOPIC_CONFIGS[name].config_type,
                "documentation": None,
            }
        )
    return described


def describe_broker_configs(
    values: Mapping[str, str], only: Collection[str] | None
) -> list[dict[str, Any]]:
    """Describes the broker's static configuration (read-only at run time)."""
    return [
        {
            "name": name,
            "value": value,
            "read_only": True,
            "config_source": STATIC_BROKER_CONFIG,
            "is_sensitive": False,
            "synonyms": [],
            "config_type": STRING_TYPE,
            "documentation": None,
        }
        for name, value in sorted(values.items())
        if only is None or name in only
    ]

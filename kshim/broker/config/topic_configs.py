"""A topic's effective configs as DescribeConfigs and CreateTopics describe them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TopicConfigs:
    values: dict[str, str]  # every effective config
    overridden: frozenset[str]  # the names set on the topic rather than by broker defaults
    read_only: bool

    def overrides(self) -> dict[str, str]:
        """The configs set on the topic itself (what AlterConfigs replaces)."""
        return {name: self.values[name] for name in self.overridden}

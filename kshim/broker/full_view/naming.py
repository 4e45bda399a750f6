"""Which topics have a view, and which names are views: ``T.full`` for a topic ``T``."""

from __future__ import annotations

from collections.abc import Mapping

from kshim.broker.topics import Topic

VIEW_SUFFIX = ".full"
VIEW_CONFIG = "kshim.full.view"


def view_name(topic: str) -> str:
    return topic + VIEW_SUFFIX


def may_have_view(topic: str) -> bool:
    """A topic named ``X.full`` never has a view of its own (no ``X.full.full``)."""
    return not topic.endswith(VIEW_SUFFIX)


def has_view(topic: Topic) -> bool:
    return may_have_view(topic.record.name) and topic.configs.get(VIEW_CONFIG) == "true"


def reserved_for_view(name: str) -> bool:
    """True for ``X.full`` where ``X`` could have a view: such names are never created."""
    return name.endswith(VIEW_SUFFIX) and may_have_view(name[: -len(VIEW_SUFFIX)])


def source_name(name: str) -> str | None:
    """The name of the topic ``T`` whose view would be called ``name``, or None; whether or
    not ``T`` or its view exists."""
    return name[: -len(VIEW_SUFFIX)] if reserved_for_view(name) else None


def source_of(topics: Mapping[str, Topic], name: str) -> Topic | None:
    """The topic ``T`` whose view is named ``name``, if that view exists."""
    source_topic = source_name(name)
    if source_topic is None:
        return None
    source = topics.get(source_topic)
    return source if source is not None and has_view(source) else None

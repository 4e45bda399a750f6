"""Which names are delay companions: ``T.delay`` for a stored topic ``T``, and the record
headers delayed delivery reads and writes."""

from __future__ import annotations

DELAY_SUFFIX = ".delay"

DELIVER_AT_HEADER = "kshim-deliver-at"  # epoch milliseconds, as decimal text
DELAY_MS_HEADER = "kshim-delay-ms"  # milliseconds after the record's timestamp
CANCEL_HEADER = "kshim-delay-cancel"  # cancels every pending record with the record's key
REPLACE_HEADER = "kshim-delay-replace"  # the record replaces those pending with its key
DELAYED_FROM_HEADER = "kshim-delayed-from"  # added on delivery: "partition:offset" in T.delay


def delay_name(topic: str) -> str:
    return topic + DELAY_SUFFIX


def may_have_delay(topic: str) -> bool:
    """A companion has no companion of its own (no ``X.delay.delay``)."""
    return not topic.endswith(DELAY_SUFFIX)


def reserved_for_delay(name: str) -> bool:
    """True for ``X.delay`` where ``X`` could have a companion: no topic is created under
    such a name except the companion itself."""
    return name.endswith(DELAY_SUFFIX) and may_have_delay(name[: -len(DELAY_SUFFIX)])


def target_of(name: str) -> str | None:
    """The topic ``T`` whose companion is called ``name``, or None."""
    return name[: -len(DELAY_SUFFIX)] if reserved_for_delay(name) else None


def delayed_from(partition: int, offset: int) -> bytes:
    """The ``kshim-delayed-from`` value of a record delivered from ``T.delay``."""
    return f"{partition}:{offset}".encode()

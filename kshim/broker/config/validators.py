"""Config values checked as Kafka's ConfigDef checks them, and refused in its words.

A validator takes a value's text, returns it as kshim keeps it, or raises InvalidValue
with Kafka's reason; ``refusal`` words that as Kafka's ConfigException does ("Invalid value
soon for configuration retention.ms: Not a number of type LONG"). ``VALUE_RULES`` says what
each validator accepts, for the generated configuration reference (keys.py's
``value_rule``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from kshim.broker.config.values import (
    java_double_text,
    java_trim,
    parse_boolean,
    parse_double,
    parse_integer,
    parse_list,
)

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1


class ConfigError(ValueError):
    """A configuration key is unknown or its value invalid (Kafka's INVALID_CONFIG)."""


class InvalidValue(ConfigError):
    """A value a validator refuses: the value as Kafka's ConfigException shows it, and
    Kafka's reason ("Not a number of type LONG", "Value must be at least 1", ...)."""

    def __init__(self, value: object, reason: str) -> None:
        super().__init__(reason)
        self.value = value
        self.reason = reason


def refusal(key: str, error: ConfigError, source: str = "") -> str:
    """``error`` about ``key`` in Kafka's words for a refused value (ConfigException:
    "Invalid value V for configuration K: REASON"), with where the key was set after it
    when ``source`` says; other errors as "K: error"."""
    where = f"{key} (from {source})" if source else key
    if isinstance(error, InvalidValue):
        return f"Invalid value {error.value} for configuration {where}: {error.reason}"
    return f"{where}: {error}"


# What each validator accepts, in words: the configuration reference is generated from
# this table (kshim/cli/reference_pages.py), so that it cannot drift from the checks.
VALUE_RULES: dict[Callable[[str], str], str] = {}


def described(check: Callable[[str], str], rule: str) -> Callable[[str], str]:
    VALUE_RULES[check] = rule
    return check


def _check_range(number: float, shown: str, minimum: float, maximum: float) -> None:
    """ConfigDef.Range's check; ``shown`` is the parsed number as Kafka prints it."""
    if number < minimum:
        raise InvalidValue(shown, f"Value must be at least {minimum}")
    if number > maximum:
        raise InvalidValue(shown, f"Value must be no more than {maximum}")


def integer(minimum: int = -1, maximum: int = LONG_MAX) -> Callable[[str], str]:
    """A Kafka INT (when ``maximum`` fits one, as for every INT key kshim shares with
    Kafka) or LONG, between the bounds."""
    bits, type_name = (32, "INT") if maximum <= INT_MAX else (64, "LONG")

    def check(value: str) -> str:
        number = parse_integer(value, bits)
        if number is None:
            raise InvalidValue(value, f"Not a number of type {type_name}")
        _check_range(number, str(number), minimum, maximum)
        return str(number)

    unbounded = maximum in (INT_MAX, LONG_MAX)
    bounds = f"at least {minimum}" if unbounded else f"{minimum} to {maximum}"
    return described(check, f"{type_name}, {bounds}")


def _one_of(value: str, allowed: tuple[str, ...]) -> str:
    """ConfigDef.ValidString's check, on the trimmed value (as Kafka parses a STRING)."""
    if value not in allowed:
        raise InvalidValue(value, f"String must be one of: {', '.join(allowed)}")
    return value


def choice(*allowed: str) -> Callable[[str], str]:
    def check(value: str) -> str:
        return _one_of(java_trim(value), allowed)

    return described(check, "one of " + ", ".join(allowed))


CLEANUP_POLICIES = ("compact", "delete")  # in the order Kafka's ValidList names them


def cleanup_policy(value: str) -> str:
    """A LIST of policies (ConfigDef.ValidList). Kafka 3.9 takes an empty list, and then
    neither deletes nor compacts; kshim asks for at least one, refused as an empty item."""
    policies = parse_list(value) or [""]
    return ",".join(_one_of(policy, CLEANUP_POLICIES) for policy in policies)


def ratio(value: str) -> str:
    """A DOUBLE between 0 and 1. Kafka takes NaN (no comparison refuses it); kshim refuses
    it as not a number."""
    number = parse_double(value)
    if number is None or math.isnan(number):
        raise InvalidValue(value, "Not a number of type DOUBLE")
    _check_range(number, java_double_text(number), 0, 1)
    return str(number)


def boolean(value: str) -> str:
    answer = parse_boolean(value)
    if answer is None:
        raise InvalidValue(value, "Expected value to be either true or false")
    return "true" if answer else "false"


def optional_address(value: str) -> str:
    value = value.strip()
    _, separator, port = value.rpartition(":")
    if value and not (separator and port.isascii() and port.isdigit() and int(port) <= 65535):
        raise ConfigError(f"{value!r} is not host:port (port 0-65535) or empty")
    return value


def optional_http_url(value: str) -> str:
    value = value.strip()
    if value and not value.startswith(("http://", "https://")):
        raise ConfigError(f"{value!r} is not an http:// or https:// URL, or empty")
    return value


def any_string(value: str) -> str:
    return value


VALUE_RULES.update(
    {
        cleanup_policy: "compact, delete, or both (comma-separated)",
        ratio: "DOUBLE, 0 to 1",
        boolean: "true or false",
        optional_address: "host:port, or empty",
        optional_http_url: "an http:// or https:// URL, or empty",
        any_string: "text",
    }
)

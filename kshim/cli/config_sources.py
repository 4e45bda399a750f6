"""``kshim serve``'s configuration, gathered from its sources with each entry's origin kept.

The origin is what makes a mistake quick to find: an invalid value names its key and
where it came from (``log.retention.ms (from KSHIM_LOG_RETENTION_MS): 'soon' is not an
integer``), and so does the warning for a key kshim does not know. Unknown keys are
warned of and ignored, as Kafka logs the configurations "supplied but are not used yet"
and starts (kshim/broker/config/keys.py).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from kshim.broker.config.broker_config import BrokerConfig, parse_listener
from kshim.broker.config.keys import (
    broker_validator,
    environment_keys,
    is_known_key,
    parse_properties,
)
from kshim.broker.config.validators import ConfigError, refusal
from kshim.cli.argument_types import accepted_text
from kshim.cli.errors import print_warning
from kshim.client.errors import reason

DEFAULT_LISTEN = "127.0.0.1:9092"
DEFAULT_DATA_DIR = "./kshim-data"
LISTENER_KEYS = ("listeners", "advertised.listeners")


@dataclass(frozen=True, slots=True)
class Setting:
    key: str
    value: str
    source: str  # the file, the KSHIM_* variable or the flag it came from


def listener_argument(text: str) -> str:
    """argparse type of --listen and --advertised: ``text`` if it is host:port."""
    return accepted_text(text, parse_listener)


def load_config(
    arguments: argparse.Namespace,
    environment: Mapping[str, str],
    warn: Callable[[str], None] = print_warning,
) -> BrokerConfig:
    """Merges defaults, the config file, environment, --set and the flags (later wins).

    Calls ``warn`` once for each unknown key; raises ConfigError for an unreadable or
    malformed source or an invalid value, naming the source.
    """
    settings = [
        *_file_settings(arguments.config),
        *_environment_settings(environment),
        *_set_settings(arguments.set),
    ]
    chosen: dict[str, str] = {}
    for setting in _known(settings, warn):
        _check(setting)
        chosen[setting.key] = setting.value
    return BrokerConfig.load([chosen, _flag_values(arguments, chosen)])


def _file_settings(path: str | None) -> list[Setting]:
    if not path:
        return []
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as error:
        raise ConfigError(f"cannot read --config {path}: {reason(error)}") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"--config {path} is not UTF-8 text: {error.reason}") from None
    try:
        entries = parse_properties(text)
    except ConfigError as error:
        raise ConfigError(f"--config {path}: {error}") from None
    return [Setting(key, value, path) for key, value in entries.items()]


def _environment_settings(environment: Mapping[str, str]) -> list[Setting]:
    return [
        Setting(key, environment[name], name) for name, key in environment_keys(environment).items()
    ]


def _set_settings(arguments: Sequence[str]) -> list[Setting]:
    settings = []
    for argument in arguments:
        try:
            entries = parse_properties(argument)
        except ConfigError:
            entries = {}
        # Unlike a file's line, ``--set`` needs its separator: ``--set retention.ms`` is a
        # forgotten value, not a key set to the empty string.
        if len(entries) != 1 or not any(mark in argument for mark in "=:"):
            raise ConfigError(f"--set {argument}: expected KEY=VALUE")
        [(key, value)] = entries.items()
        settings.append(Setting(key, value, "--set"))
    return settings


def _known(settings: list[Setting], warn: Callable[[str], None]) -> list[Setting]:
    """The settings of keys kshim knows; warns once of each other key, naming every
    source that gave it."""
    known: list[Setting] = []
    unknown: dict[str, list[str]] = {}
    for setting in settings:
        if is_known_key(setting.key):
            known.append(setting)
        elif setting.source not in unknown.setdefault(setting.key, []):
            unknown[setting.key].append(setting.source)
    for key, sources in unknown.items():
        warn(f"unknown configuration key {key} (from {', '.join(sources)})")
    return known


def _check(setting: Setting) -> None:
    """Raises ConfigError naming the key and its source when its value is invalid."""
    validator = broker_validator(setting.key)
    try:
        value = validator(setting.value) if validator else setting.value
        if setting.key in LISTENER_KEYS and value:
            parse_listener(value)
    except ConfigError as error:
        raise ConfigError(refusal(setting.key, error, setting.source)) from None


def _flag_values(arguments: argparse.Namespace, chosen: Mapping[str, str]) -> dict[str, str]:
    flags: dict[str, str] = {}
    if arguments.listen or "listeners" not in chosen:
        flags["listeners"] = f"PLAINTEXT://{arguments.listen or DEFAULT_LISTEN}"
    if arguments.data_dir or "log.dirs" not in chosen:
        flags["log.dirs"] = arguments.data_dir or DEFAULT_DATA_DIR
    if arguments.advertised:
        flags["advertised.listeners"] = f"PLAINTEXT://{arguments.advertised}"
    if arguments.review_hook:
        flags["kshim.review.hook"] = arguments.review_hook
    return flags

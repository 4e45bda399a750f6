"""The manual's reference pages, generated from the code so that they cannot drift from it:
every configuration key (from the key tables of kshim/broker/config/keys.py and
security_keys.py) and every command's options (from the argument parsers).

    python -m kshim.cli.reference_pages [DIRECTORY]   # default docs/reference

writes ``configuration-keys.md`` and ``command-line.md``; tests/test_docs_site.py fails
when the committed pages differ from what this writes.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from kshim.broker.config.keys import BROKER_DEFAULTS, TOPIC_CONFIGS, value_rule
from kshim.broker.config.security_keys import SECURITY_DEFAULTS
from kshim.cli.main import build_parser

DEFAULT_DIRECTORY = Path("docs/reference")
HELP_COLUMNS = "100"  # argparse wraps help to the terminal's width: fixed, for the same page
TYPE_NAMES = {1: "BOOLEAN", 2: "STRING", 3: "INT", 5: "LONG", 6: "DOUBLE", 7: "LIST"}
KSHIM_PREFIX = "kshim."


def configuration_keys_page() -> str:
    """Every broker key with its default and what it accepts, then every topic key with
    the broker key that gives its default."""
    lines = [
        "# Configuration keys",
        "",
        "Generated from the code (`python -m kshim.cli.reference_pages`). Keys are Kafka's",
        "wherever Kafka has one, with Kafka's meaning; `kshim.*` keys are kshim's own. Where",
        "they are set (file, environment, `--set`) and what the main ones do:",
        "[Configuration](../configuration.md).",
        "",
        "## Broker keys",
        "",
        "| key | default | accepts | origin |",
        "|---|---|---|---|",
    ]
    for key in sorted({**BROKER_DEFAULTS, **SECURITY_DEFAULTS}):
        default = {**BROKER_DEFAULTS, **SECURITY_DEFAULTS}[key]
        rule = value_rule(key) or "see [Security](../security.md)"
        lines.append(f"| `{key}` | {_code(default)} | {rule} | {_origin(key)} |")
    lines += [
        "",
        "## Topic keys",
        "",
        "Set per topic (CreateTopics, `kshim topics create --config`, AlterConfigs); a topic",
        "without one takes its broker key's value.",
        "",
        "| topic key | broker key (default) | type | accepts |",
        "|---|---|---|---|",
    ]
    for key, spec in TOPIC_CONFIGS.items():
        rule = value_rule(spec.broker_key) or ""
        type_name = TYPE_NAMES[spec.config_type]
        lines.append(f"| `{key}` | `{spec.broker_key}` | {type_name} | {rule} |")
    return "\n".join(lines) + "\n"


def _code(value: str) -> str:
    return f"`{value}`" if value else "(empty)"


def _origin(key: str) -> str:
    return "kshim" if key.startswith(KSHIM_PREFIX) else "Kafka"


def command_line_page() -> str:
    """Each command's and subcommand's ``--help``, as the commands print it."""
    lines = [
        "# Command line",
        "",
        "Generated from the argument parsers (`python -m kshim.cli.reference_pages`): each",
        "command's `--help`. What the commands do, with examples:",
        "[Configuration](../configuration.md).",
    ]
    for name, parser in _commands(build_parser(), "kshim"):
        lines += ["", f"## `{name}`", "", "```text", parser.format_help().rstrip(), "```"]
    return "\n".join(lines) + "\n"


def _commands(
    parser: argparse.ArgumentParser, name: str
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """``parser`` and, depth first, every subcommand's parser, with its full name."""
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child, subparser in action.choices.items():
                yield from _commands(subparser, f"{name} {child}")


def write_pages(directory: Path) -> list[Path]:
    """Writes both pages into ``directory``; returns their paths."""
    os.environ["COLUMNS"] = HELP_COLUMNS
    pages = {
        "configuration-keys.md": configuration_keys_page(),
        "command-line.md": command_line_page(),
    }
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for file_name, text in pages.items():
        path = directory / file_name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    for written_path in write_pages(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_DIRECTORY):
        print(written_path)

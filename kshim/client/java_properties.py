"""Java properties text, as java.util.Properties.load reads it: the format of Kafka's client
properties files (``--command-config``, ``--kafka-config``).

Kafka's own broker settings are read by kshim/broker/config/keys.py's simpler reader; a
client's file needs continuation lines more often (inline PEM spans lines) and must be
read by kshim's raw client, which imports nothing from the broker.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

BLANKS = " \t\f"  # what Properties.load counts as white space around keys and values
LINE_BREAK = re.compile(r"\r\n|\r|\n")
ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.?)", re.DOTALL)
ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_java_properties(text: str) -> dict[str, str]:
    """The entries of Java properties text, as java.util.Properties.load reads it: ``key=value``,
    ``key: value`` or ``key value``; ``#`` and ``!`` comment lines; a line ending in an odd
    number of backslashes continues on the next, whose leading blanks are dropped (so that a
    PEM value can span lines); ``\\t \\n \\r \\f``, ``\\uXXXX`` and ``\\x`` for any other
    ``x`` in keys and values. The last of a repeated key wins."""
    return {key: value for _, key, value in java_properties_entries(text)}


def java_properties_entries(text: str) -> Iterator[tuple[int, str, str]]:
    """(line number, key, value) of each entry of Java properties text, in order, read as
    ``parse_java_properties`` says; the number is the entry's first line, counted from 1."""
    lines = enumerate(LINE_BREAK.split(text), start=1)
    for number, line in lines:
        logical = line.lstrip(BLANKS)
        if not logical or logical[0] in "#!":
            continue
        while _continues(logical):
            logical = logical[:-1] + next(lines, (0, ""))[1].lstrip(BLANKS)
        key, value = _split_entry(logical)
        yield number, _unescape(key), _unescape(value)


def _continues(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _split_entry(line: str) -> tuple[str, str]:
    """(key, value) of a logical line: the key ends at the first unescaped ``=``, ``:`` or
    blank; blanks around one ``=`` or ``:`` after it are skipped."""
    end = 0
    while end < len(line) and line[end] not in "=:" + BLANKS:
        end += 2 if line[end] == "\\" else 1
    end = min(end, len(line))
    rest = line[end:].lstrip(BLANKS)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(BLANKS)
    return line[:end], rest


def _unescape(text: str) -> str:
    """``\\uXXXX`` as its character, ``\\t \\n \\r \\f`` as theirs, ``\\x`` as ``x``."""

    def replace(escape: re.Match[str]) -> str:
        code = escape.group(1)
        if len(code) == 5:
            return chr(int(code[1:], 16))
        return ESCAPES.get(code, code)

    return ESCAPE.sub(replace, text)


def load_client_properties(path: str) -> dict[str, str]:
    """The entries of the Java properties file at ``path``, read as UTF-8; raises OSError,
    and UnicodeDecodeError for a file that is not UTF-8."""
    with open(path, encoding="utf-8") as handle:
        return parse_java_properties(handle.read())

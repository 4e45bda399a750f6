"""Config text read as Apache Kafka reads it, so that kshim takes and refuses what Kafka does.

Kafka's ConfigDef.parseType trims a value (Java's String.trim: every character up to
U+0020), then parses it with Java's Long.parseLong, Integer.parseInt or
Double.parseDouble, or compares it with "true" and "false" ignoring case; a LIST is split
at commas with the blanks around them. Python's int() and float() take more ("1_000",
"nan", "inf"), so the numbers here follow Java's grammar: each parser returns None for
text Kafka calls "Not a number of type ...". ``java_double_text`` prints a parsed double as
Kafka's refusals show it (Double.toString: 2.0, 1.0E7).
"""

from __future__ import annotations

import math
import re

JAVA_BLANKS = "".join(map(chr, range(0x21)))  # what String.trim removes
# Long.parseLong and Integer.parseInt: an optional sign, then decimal digits.
JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")
# Double.parseDouble's decimal forms (FloatingDecimal.readJavaFormatString), with the
# optional type suffix; the hexadecimal form (0x1p3) is left out, as no config needs it.
JAVA_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)")
# Where Double.toString switches to computerized scientific notation.
PLAIN_DOUBLE_RANGE = (1e-3, 1e7)
# ConfigDef's COMMA_WITH_WHITESPACE (Java's \s: ASCII blanks only).
LIST_SEPARATOR = re.compile(r"[ \t\n\x0b\f\r]*,[ \t\n\x0b\f\r]*")


def java_trim(text: str) -> str:
    return text.strip(JAVA_BLANKS)


def parse_integer(text: str, bits: int) -> int | None:
    """The signed ``bits``-bit integer ``text`` holds for Java, or None."""
    trimmed = java_trim(text)
    if JAVA_INTEGER.fullmatch(trimmed) is None:
        return None
    number = int(trimmed)
    limit = 1 << (bits - 1)
    return number if -limit <= number < limit else None


def parse_double(text: str) -> float | None:
    """The double ``text`` holds for Java (NaN and Infinity spelled as Java spells them),
    or None."""
    trimmed = java_trim(text)
    if JAVA_DOUBLE.fullmatch(trimmed) is None:
        return None
    return float(trimmed.rstrip("fFdD"))


def parse_boolean(text: str) -> bool | None:
    trimmed = java_trim(text).lower()
    return {"true": True, "false": False}.get(trimmed)


def parse_list(text: str) -> list[str]:
    """The items of a LIST value: none for blank text, else every piece between commas,
    empty ones included (Kafka refuses those by its validator)."""
    trimmed = java_trim(text)
    return LIST_SEPARATOR.split(trimmed) if trimmed else []


def java_double_text(number: float) -> str:
    """``number`` as Java's Double.toString writes it: at least one digit after the point,
    and scientific notation ("1.0E7") outside [10^-3, 10^7)."""
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    low, high = PLAIN_DOUBLE_RANGE
    if number == 0 or low <= abs(number) < high:
        return repr(number)  # Python's shortest digits, positional in this range
    # Imported here: the decimal module costs every broker 0.4 MB (measured 2026-11-29), and
    # only a double outside that range needs it.
    from decimal import Decimal

    sign, digits, exponent = Decimal(repr(number)).normalize().as_tuple()
    assert isinstance(exponent, int)  # a finite number
    fraction = "".join(map(str, digits[1:])) or "0"
    return f"{'-' if sign else ''}{digits[0]}.{fraction}E{exponent + len(digits) - 1}"

"""``ssl.principal.mapping.rules``: a TLS client certificate's subject to a user name.

Kafka's SslPrincipalMapper (KIP-371): a comma-separated list of ``DEFAULT`` (the
distinguished name as it is, RFC 2253) and ``RULE:pattern/replacement/`` with an optional
``L`` or ``U`` to lower- or upper-case the result. The first rule whose pattern matches the
whole name gives the user; a name no rule matches is refused (the connection cannot be
authenticated), as Kafka's NoMatchingRule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_RULE = re.compile(
    r"\s*(?:(?P<default>DEFAULT)|RULE:(?P<pattern>(?:\\.|[^\\/])*)/"
    r"(?P<replacement>(?:\\.|[^\\/])*)/(?P<case>[LU])?)\s*(?:,|$)"
)
_JAVA_GROUP = re.compile(r"\$(\d)")


class MappingRuleError(ValueError):
    """``ssl.principal.mapping.rules`` does not parse."""


class NoMatchingRule(Exception):
    """No rule maps this distinguished name."""


@dataclass(frozen=True, slots=True)
class Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        if self.pattern.fullmatch(name) is None:
            return None
        mapped = self.pattern.sub(self.replacement, name)
        return (
            mapped.lower() if self.case == "L" else mapped.upper() if self.case == "U" else mapped
        )


def parse_rules(text: str) -> list[Rule]:
    """The rules of a ``ssl.principal.mapping.rules`` value; raises MappingRuleError."""
    rules: list[Rule] = []
    position = 0
    text = text.strip()
    while position < len(text):
        match = _RULE.match(text, position)
        if match is None or match.end() == position:
            raise MappingRuleError(f"invalid rule at {text[position:]!r}")
        position = match.end()
        if match["default"]:
            rules.append(Rule(None))
            continue
        try:
            pattern = re.compile(match["pattern"].replace("\\/", "/"))
        except re.error as error:
            raise MappingRuleError(f"rule pattern {match['pattern']!r}: {error}") from None
        # Java's replacement syntax names groups $1; Python's is \1.
        replacement = _JAVA_GROUP.sub(r"\\\1", match["replacement"].replace("\\/", "/"))
        rules.append(Rule(pattern, replacement, match["case"] or ""))
    return rules or [Rule(None)]


def map_subject(rules: list[Rule], distinguished_name: str) -> str:
    """The user name the first matching rule gives; raises NoMatchingRule."""
    for rule in rules:
        mapped = rule.apply(distinguished_name)
        if mapped is not None:
            return mapped
    raise NoMatchingRule(f"no ssl.principal.mapping.rules rule matches {distinguished_name!r}")

"""ssl.principal.mapping.rules, as Kafka's SslPrincipalMapper reads them (KIP-371)."""

from __future__ import annotations

import pytest

from kshim.broker.security.principal_mapping import (
    MappingRuleError,
    NoMatchingRule,
    map_subject,
    parse_rules,
)

KAFKA_EXAMPLE = (
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,"
    "DEFAULT"
)


@pytest.mark.parametrize(
    ("name", "user"),
    [
        ("CN=kafka-server1,OU=ServiceUsers,O=Org,C=US", "kafka-server1"),
        ("CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Santa Clara,ST=CA,C=US", "duke@javasoft"),
        ("OU=JavaSoft,O=Sun,CN=Duke.Example", "duke.example"),
        ("OU=Nobody", "OU=Nobody"),
    ],
)
def test_kafkas_documented_rules(name: str, user: str) -> None:
    assert map_subject(parse_rules(KAFKA_EXAMPLE), name) == user


def test_default_keeps_the_whole_name() -> None:
    assert map_subject(parse_rules("DEFAULT"), "CN=a,O=b") == "CN=a,O=b"


def test_upper_case_and_escaped_slashes() -> None:
    rules = parse_rules(r"RULE:^CN=([^,]*),O=a\/b$/$1/U")
    assert map_subject(rules, "CN=alice,O=a/b") == "ALICE"


def test_a_name_no_rule_matches_is_refused() -> None:
    with pytest.raises(NoMatchingRule):
        map_subject(parse_rules("RULE:^CN=(.*)$/$1/"), "O=nobody")


@pytest.mark.parametrize("text", ["RULE:^CN=(.*/$1/", "NONSENSE", "RULE:(/x/"])
def test_malformed_rules_are_refused(text: str) -> None:
    with pytest.raises(MappingRuleError):
        parse_rules(text)

"""Kafka's JAAS config text (kshim/client/jaas.py): what Kafka's JaasConfig reads, read the
same; what it refuses, refused with a message that says where and never shows a value."""

from __future__ import annotations

import pytest

from kshim.client.jaas import PLAIN_LOGIN_MODULE, JaasError, parse_jaas_config, plain_users

KAFKA_EXAMPLE = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" '
    'user_alice="alice-secret";'
)


def test_kafkas_example() -> None:
    assert plain_users(KAFKA_EXAMPLE) == {"admin": "admin-secret", "alice": "alice-secret"}
    module = parse_jaas_config(KAFKA_EXAMPLE)
    assert (module.name, module.control_flag) == (PLAIN_LOGIN_MODULE, "required")
    assert module.options["username"] == "admin"
    assert "admin-secret" not in repr(module)


def test_layout_comments_and_quotes() -> None:
    text = f"""
        // the broker's own login, then its users
        {PLAIN_LOGIN_MODULE} REQUIRED /* flags are read in any case */
            username='admin'
            user_alice = "a;b=c 'd'"   // ; and = inside quotes are the value's
            user_bob='say "hi"'
            user_carol=plain-word.v2_$x
        ;
    """
    assert plain_users(text) == {
        "alice": "a;b=c 'd'",
        "bob": 'say "hi"',
        "carol": "plain-word.v2_$x",
    }
    assert parse_jaas_config(text).control_flag == "required"


@pytest.mark.parametrize(
    ("quoted", "value"),
    [
        (r'"a\"b"', 'a"b'),
        (r'"back\\slash"', "back\\slash"),
        (r'"tab\there"', "tab\there"),
        (r'"line\nbreak"', "line\nbreak"),
        (r'"octal\101\60x"', "octalA0x"),
        (r'"\q"', "q"),
        ('"ünïcode"', "ünïcode"),
        ('""', ""),
    ],
)
def test_java_escapes_in_quoted_values(quoted: str, value: str) -> None:
    assert plain_users(f"{PLAIN_LOGIN_MODULE} required user_x={quoted};") == {"x": value}


def test_the_last_of_a_repeated_option_wins_and_nameless_users_are_none() -> None:
    text = f'{PLAIN_LOGIN_MODULE} sufficient user_a="1" user_a="2" user_="x" other="y";'
    assert plain_users(text) == {"a": "2"}


def test_every_control_flag() -> None:
    for flag in ("required", "requisite", "sufficient", "optional"):
        assert parse_jaas_config(f"{PLAIN_LOGIN_MODULE} {flag};").control_flag == flag


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "holds 0 login modules"),
        ("  // only a comment", "holds 0 login modules"),
        (f"{PLAIN_LOGIN_MODULE} required; {PLAIN_LOGIN_MODULE} required;", "holds 2"),
        (f'{PLAIN_LOGIN_MODULE} required user_a="secret"', "not terminated by a semicolon"),
        (PLAIN_LOGIN_MODULE, "control flag not specified"),
        (f"{PLAIN_LOGIN_MODULE} mandatory;", "invalid login module control flag"),
        (f"{PLAIN_LOGIN_MODULE} required user_a=;", "value not specified for option 'user_a'"),
        (f'{PLAIN_LOGIN_MODULE} required user_a "secret";', "value not specified"),
        (f"{PLAIN_LOGIN_MODULE} required user_a=", "value not specified"),
        (f"{PLAIN_LOGIN_MODULE} required =x;", "an option name expected"),
        (f'{PLAIN_LOGIN_MODULE} required user_a="secret;', "quoted at character"),
        (f'{PLAIN_LOGIN_MODULE} required user_a="sec\nret";', "is not closed"),
        (f"{PLAIN_LOGIN_MODULE} required /* user_a=secret;", "comment at character"),
        (f"{PLAIN_LOGIN_MODULE} required user_a=/secret;", "unexpected '/'"),
        (f"{PLAIN_LOGIN_MODULE} required user_a=sec,ret;", "unexpected ','"),
        ('"quoted.Module" required;', "class name expected"),
    ],
)
def test_malformed_text_is_refused_without_showing_values(text: str, expected: str) -> None:
    with pytest.raises(JaasError, match=expected) as raised:
        parse_jaas_config(text)
    assert "secret" not in str(raised.value)


def test_plain_users_come_only_from_the_plain_login_module() -> None:
    scram = 'org.apache.kafka.common.security.scram.ScramLoginModule required user_a="x";'
    with pytest.raises(JaasError, match="PLAIN users are options of"):
        plain_users(scram)


def test_a_jaas_error_is_a_value_error() -> None:
    assert issubclass(JaasError, ValueError)

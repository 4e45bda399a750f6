"""Kafka's JAAS configuration text (``sasl.jaas.config``), as its JaasConfig reads it::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret"
        user_admin="admin-secret" user_alice="alice-secret";

A login module's class name, a control flag (required, requisite, sufficient or
optional), options ``key=value``, and a semicolon. Kafka tokenises it with Java's
StreamTokenizer, and this follows it: a value is a word (letters, digits and ``. - _ $``)
or a string quoted with ``"`` or ``'`` in which ``\\`` escapes as in Java (``\\n``, ``\\t``,
octal ``\\101``, and ``\\x`` for any other ``x``); ``//`` and ``/* */`` are comments. A
broker's ``listener.name.<listener>.<mechanism>.sasl.jaas.config`` holds exactly one
module (JaasContext.loadServerContext), and so does a client's ``sasl.jaas.config``, whose
options are its username and password (``kshim.client.security``): the broker and kshim's
client both read it here.

The PLAIN users of a listener are the options ``user_<name>="<password>"`` of its
PlainLoginModule (Kafka's PlainServerCallbackHandler). Errors name where the text goes
wrong, never a value in it: values are passwords.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
USER_PREFIX = "user_"
CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")
QUOTES = "\"'"
WORD_PUNCTUATION = ".-_$"
# Java's escapes in a quoted string (StreamTokenizer.nextToken).
ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
SYMBOLS = "=;"


class JaasError(ValueError):
    """The JAAS text is malformed."""


class JaasTokenError(JaasError):
    """No token can start at ``position`` (1-based): a character outside words and quotes,
    or a comment or quoted string that is not closed."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(message)
        self.position = position


class JaasControlFlagError(JaasError):
    """A login module's control flag is not one of CONTROL_FLAGS."""


@dataclass(frozen=True, slots=True)
class LoginModule:
    name: str  # the login module's class name
    control_flag: str
    options: dict[str, str] = field(repr=False)  # values may be passwords


@dataclass(frozen=True, slots=True)
class _Token:
    text: str
    quoted: bool
    position: int  # where it starts, 1-based, for errors

    def is_symbol(self, symbol: str) -> bool:
        return not self.quoted and self.text == symbol

    def is_symbol_of(self, symbols: str) -> bool:
        return not self.quoted and self.text in symbols


def parse_jaas_config(text: str) -> LoginModule:
    """The one login module of ``text``; raises JaasError when it is malformed or holds
    no module or several."""
    tokens = _tokenise(text)
    modules = []
    while tokens:
        modules.append(_module(tokens))
    if len(modules) != 1:
        raise JaasError(f"the JAAS config holds {len(modules)} login modules, not 1")
    return modules[0]


def plain_users(text: str) -> dict[str, str]:
    """The ``user_<name>`` passwords of ``text``'s PlainLoginModule, by user name; raises
    JaasError when ``text`` is malformed or configures another login module."""
    module = parse_jaas_config(text)
    if module.name != PLAIN_LOGIN_MODULE:
        raise JaasError(f"PLAIN users are options of {PLAIN_LOGIN_MODULE}, not of {module.name}")
    return {
        key.removeprefix(USER_PREFIX): value
        for key, value in module.options.items()
        if key.startswith(USER_PREFIX) and len(key) > len(USER_PREFIX)
    }


def _module(tokens: list[_Token]) -> LoginModule:
    """Takes one ``module flag options ;`` off the front of ``tokens``."""
    name = tokens.pop(0)
    if name.quoted or name.is_symbol_of(SYMBOLS):
        raise JaasError(f"a login module's class name expected at character {name.position}")
    if not tokens:
        raise JaasError("login module control flag not specified in the JAAS config")
    flag = tokens.pop(0)
    if flag.text.lower() not in CONTROL_FLAGS:
        raise JaasControlFlagError(
            f"invalid login module control flag at character {flag.position}: "
            f"expected one of {', '.join(CONTROL_FLAGS)}"
        )
    options: dict[str, str] = {}
    while tokens and not tokens[0].is_symbol(";"):
        key = tokens.pop(0)
        if key.is_symbol("="):
            raise JaasError(f"an option name expected at character {key.position}")
        if len(tokens) < 2 or not tokens[0].is_symbol("=") or tokens[1].is_symbol_of(SYMBOLS):
            raise JaasError(f"value not specified for option {key.text!r} in the JAAS config")
        options[key.text] = tokens[1].text  # the last of a repeated option wins, as in Kafka
        del tokens[:2]
    if not tokens:
        raise JaasError("the JAAS config entry is not terminated by a semicolon")
    tokens.pop(0)
    return LoginModule(name.text, flag.text.lower(), options)


def _tokenise(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    index = 0
    while index < len(text):
        character = text[index]
        if character.isspace():
            index += 1
        elif text.startswith("//", index):
            end = text.find("\n", index)
            index = len(text) if end < 0 else end + 1
        elif text.startswith("/*", index):
            end = text.find("*/", index + 2)
            if end < 0:
                raise JaasTokenError(
                    f"the comment at character {index + 1} is not closed", index + 1
                )
            index = end + 2
        elif character in QUOTES:
            value, index_after = _quoted(text, index)
            tokens.append(_Token(value, True, index + 1))
            index = index_after
        elif character in SYMBOLS:
            tokens.append(_Token(character, False, index + 1))
            index += 1
        elif _is_word_character(character):
            start = index
            while index < len(text) and _is_word_character(text[index]):
                index += 1
            tokens.append(_Token(text[start:index], False, start + 1))
        else:
            raise JaasTokenError(
                f"unexpected {character!r} at character {index + 1} (a value holding it "
                "must be quoted)",
                index + 1,
            )
    return tokens


def _is_word_character(character: str) -> bool:
    # StreamTokenizer's word characters, with those Kafka adds (- _ $): letters, digits,
    # '.', and every character from U+00A0 on.
    return (
        (character.isascii() and character.isalnum())
        or character in WORD_PUNCTUATION
        or ord(character) >= 0xA0
    )


def _quoted(text: str, start: int) -> tuple[str, int]:
    """The value of the string quoted at ``start`` and the index after its closing quote."""
    quote = text[start]
    value: list[str] = []
    index = start + 1
    while index < len(text):
        character = text[index]
        if character == quote:
            return "".join(value), index + 1
        if character == "\\" and index + 1 < len(text):
            escaped, index = _escape(text, index + 1)
            value.append(escaped)
            continue
        if character == "\n":
            break  # StreamTokenizer ends a string at the end of its line
        value.append(character)
        index += 1
    raise JaasTokenError(f"the string quoted at character {start + 1} is not closed", start + 1)


def _escape(text: str, index: int) -> tuple[str, int]:
    """The character escaped by the backslash before ``index``, and the index after it:
    up to three octal digits (at most \\377), one of ESCAPES, or any other character."""
    digits = ""
    limit = 3 if text[index] in "0123" else 2
    while len(digits) < limit and index < len(text) and text[index] in "01234567":
        digits += text[index]
        index += 1
    if digits:
        return chr(int(digits, 8)), index
    return ESCAPES.get(text[index], text[index]), index + 1

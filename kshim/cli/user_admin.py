"""``kshim users``' wire requests: DescribeUserScramCredentials v0 and
AlterUserScramCredentials v0 (KIP-554) through kshim's own blocking client, so the command
needs no client library and works against any Kafka broker. The password never travels:
the command sends the salt and the salted password, as Kafka's admin client does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import TypeVar

from kio.schema.alter_user_scram_credentials.v0.response import (
    AlterUserScramCredentialsResponse,
)
from kio.schema.describe_user_scram_credentials.v0.response import (
    DescribeUserScramCredentialsResponse,
)

from kshim.broker.security.scram_credential import MECHANISM_TYPES, mechanism_type
from kshim.client.admin_connection import admin_connection
from kshim.client.security import ClientSecurity
from kshim.client.topic_admin import AdminError
from kshim.client.wire import WireConnection
from kshim.protocol.errors import ErrorCode

_Response = TypeVar("_Response")

CLIENT_ID = "kshim-users"
DESCRIBE_USER_SCRAM_CREDENTIALS = (50, 0)
ALTER_USER_SCRAM_CREDENTIALS = (51, 0)
READ_TIMEOUT_S = 30.0
RESOURCE_NOT_FOUND = ErrorCode.resource_not_found  # DescribeUserScramCredentials: no credential


@dataclass(frozen=True, slots=True)
class SaltedCredential:
    """A password as AlterUserScramCredentials carries it: a salt, and the password salted
    and hashed with it (Hi of RFC 5802)."""

    salt: bytes = field(repr=False)
    salted_password: bytes = field(repr=False)
    iterations: int


@dataclass(frozen=True, slots=True)
class CredentialListing:
    """One user's credential of one mechanism, as DescribeUserScramCredentials says."""

    user: str
    mechanism: str
    iterations: int

    def to_json(self) -> dict[str, object]:
        return asdict(self)


@contextlib.contextmanager
def user_admin(
    bootstrap: str,
    timeout_s: float = READ_TIMEOUT_S,
    *,
    security: ClientSecurity | None = None,
) -> Iterator[UserAdmin]:
    """A UserAdmin on a connection to the first broker of ``bootstrap``, secured as
    ``security`` says (None: PLAINTEXT), closed after.

    Raises ValueError for a bootstrap that is not host:port, OSError when the broker cannot
    be reached or does not answer in time, AuthenticationFailed when it refuses the SASL
    credentials, AdminError on an error answer or when the broker closes the connection or
    answers something malformed.
    """
    with admin_connection(bootstrap, timeout_s, CLIENT_ID, AdminError, security) as connection:
        yield UserAdmin(connection)


class UserAdmin:
    """The credential requests, over one connection; each raises AdminError on an error
    answer."""

    def __init__(self, connection: WireConnection) -> None:
        self._connection = connection

    def describe(self, users: list[str]) -> tuple[list[CredentialListing], list[str]]:
        """(the credentials of ``users``, or of every user when it is empty; the named
        users that have none)."""
        request = {"users": [{"name": user} for user in dict.fromkeys(users)]}
        response = self._call(
            DescribeUserScramCredentialsResponse, DESCRIBE_USER_SCRAM_CREDENTIALS, request
        )
        _check(response.error_code, "cannot describe SCRAM users", response.error_message)
        listings: list[CredentialListing] = []
        missing: list[str] = []
        for result in response.results:
            if result.error_code == RESOURCE_NOT_FOUND:
                missing.append(str(result.user))
                continue
            _check(result.error_code, f"cannot describe user {result.user}", result.error_message)
            listings.extend(
                CredentialListing(
                    str(result.user), _mechanism_name(info.mechanism), int(info.iterations)
                )
                for info in result.credential_infos
            )
        return listings, missing

    def upsert(self, user: str, mechanism: str, credential: SaltedCredential) -> None:
        upsertion = {
            "name": user,
            "mechanism": mechanism_type(mechanism),
            "iterations": credential.iterations,
            "salt": credential.salt,
            "salted_password": credential.salted_password,
        }
        what = f"cannot set the {mechanism} credential of {user}"
        self._alter({"upsertions": [upsertion], "deletions": []}, what)

    def delete(self, user: str, mechanism: str) -> None:
        deletion = {"name": user, "mechanism": mechanism_type(mechanism)}
        what = f"cannot remove the {mechanism} credential of {user}"
        self._alter({"upsertions": [], "deletions": [deletion]}, what)

    def _alter(self, request: Mapping[str, object], what: str) -> None:
        response = self._call(
            AlterUserScramCredentialsResponse, ALTER_USER_SCRAM_CREDENTIALS, request
        )
        for result in response.results:
            _check(result.error_code, what, result.error_message)

    def _call(
        self, response_type: type[_Response], api: tuple[int, int], fields: Mapping[str, object]
    ) -> _Response:
        api_key, version = api
        return self._connection.call_for(response_type, api_key, version, fields)


def _mechanism_name(number: int) -> str:
    return MECHANISM_TYPES.get(number, f"mechanism {number}")


def _check(error_code: int, what: str, message: str | None) -> None:
    """Raises AdminError unless ``error_code`` is NONE: ``what``, Kafka's name for the
    error, and the broker's own message when it sent one."""
    if error_code == 0:
        return
    try:
        name = ErrorCode(error_code).name.upper()
    except ValueError:
        name = f"error code {error_code}"
    raise AdminError(f"{what}: {name}" + (f" ({message})" if message else ""))

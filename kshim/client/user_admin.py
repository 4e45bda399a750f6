"""``kshim users``' wire requests: DescribeUserScramCredentials v0 and
AlterUserScramCredentials v0 (KIP-554) through kshim's own blocking client, so the command
needs no client library and works against any Kafka broker. The password never travels:
the command sends the salt and the salted password, as Kafka's admin client does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kio.schema.alter_user_scram_credentials.v0.response import (
    AlterUserScramCredentialsResponse,
)
from kio.schema.describe_user_scram_credentials.v0.response import (
    DescribeUserScramCredentialsResponse,
)

from kshim.client.admin_connection import BootstrapAdmin
from kshim.client.json_rows import JsonRow
from kshim.client.request_versions import (
    ALTER_USER_SCRAM_CREDENTIALS,
    DESCRIBE_USER_SCRAM_CREDENTIALS,
)
from kshim.client.topic_admin import AdminError
from kshim.protocol.errors import ErrorCode
from kshim.protocol.scram_mechanisms import MECHANISM_TYPES, mechanism_type

RESOURCE_NOT_FOUND = ErrorCode.resource_not_found  # DescribeUserScramCredentials: no credential


@dataclass(frozen=True, slots=True)
class SaltedCredential:
    """A password as AlterUserScramCredentials carries it: a salt, and the password salted
    and hashed with it (Hi of RFC 5802)."""

    salt: bytes = field(repr=False)
    salted_password: bytes = field(repr=False)
    iterations: int


@dataclass(frozen=True, slots=True)
class CredentialListing(JsonRow):
    """One user's credential of one mechanism, as DescribeUserScramCredentials says."""

    user: str
    mechanism: str
    iterations: int


class UserAdmin(BootstrapAdmin):
    """The credential requests, over one connection; each raises AdminError on an error
    answer."""

    client_id = "kshim-users"
    error = AdminError

    def describe(self, users: list[str]) -> tuple[list[CredentialListing], list[str]]:
        """(the credentials of ``users``, or of every user when it is empty; the named
        users that have none)."""
        request = {"users": [{"name": user} for user in dict.fromkeys(users)]}
        response = self._call(
            DescribeUserScramCredentialsResponse, DESCRIBE_USER_SCRAM_CREDENTIALS, request
        )
        self._check(response.error_code, "cannot describe SCRAM users", response.error_message)
        listings: list[CredentialListing] = []
        missing: list[str] = []
        for result in response.results:
            if result.error_code == RESOURCE_NOT_FOUND:
                missing.append(str(result.user))
                continue
            self._check(
                result.error_code, f"cannot describe user {result.user}", result.error_message
            )
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
            self._check(result.error_code, what, result.error_message)


# ``kshim users``' admin on the bootstrap broker (BootstrapAdmin.connected).
user_admin = UserAdmin.connected


def _mechanism_name(number: int) -> str:
    return MECHANISM_TYPES.get(number, f"mechanism {number}")

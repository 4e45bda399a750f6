"""Who may log in, and with what: the SASL mechanisms' one source of users.

- SCRAM users are stored credentials (storage/meta/scram_store.py), managed with KIP-554's
  DescribeUserScramCredentials and AlterUserScramCredentials; as in Kafka, SCRAM users
  come from nowhere else (no JAAS option makes one).
- PLAIN users of a listener are the ``user_<name>`` options of its
  ``listener.name.<listener>.plain.sasl.jaas.config`` (Kafka's
  PlainServerCallbackHandler; a broker has no unprefixed ``sasl.jaas.config``). A user
  that listener does not name may also log in with PLAIN by the password of a stored
  SCRAM credential of theirs: kshim's addition, so that one ``kshim users add`` serves
  clients of either mechanism.

The credentials are read once, at construction, and kept in memory: an exchange looks one
up without touching the disk. ``alter`` writes to the store before changing what is kept.
"""

from __future__ import annotations

import asyncio
import hmac
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.config.security_keys import listener_key
from kshim.broker.security.scram_credential import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramCredential,
)
from kshim.client.jaas import JaasError, plain_users
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsResult,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from kshim.protocol.messages.describe_user_scram_credentials import (
    CredentialInfo,
    DescribeUserScramCredentialsResult,
)
from kshim.protocol.scram_mechanisms import MECHANISM_TYPES, MECHANISMS, mechanism_type
from kshim.storage.meta.scram_store import MAX_USER_BYTES, ScramStore, StoredScramCredential

PLAIN_JAAS_KEY = "plain.sasl.jaas.config"
# scramp, which serves the exchanges, refuses a salt shorter than this; a credential with
# one could never log in, so it is refused when set.
MIN_SALT_BYTES = 12
# Kafka's messages (ScramControlManager, ScramImage).
ALTERED_TWICE = "A user credential cannot be altered twice in the same request"
DESCRIBED_TWICE = "Cannot describe SCRAM credentials for the same user twice in a single request: "
NOT_FOUND_TO_DESCRIBE = "Attempt to describe a user credential that does not exist: "
# A message Kafka's ScramImage.describe leaves unset, sent as the field's default.
UNSET_MESSAGE = ""
NOT_FOUND_TO_DELETE = "Attempt to delete a user credential that does not exist"
UserMechanism = tuple[str, str]  # (user, mechanism name)


@dataclass(frozen=True, slots=True)
class _Refusal:
    code: ErrorCode
    message: str


_ALTERED_TWICE = _Refusal(ErrorCode.duplicate_resource, ALTERED_TWICE)


class Credentials:
    """The broker's users and their credentials; used from the event loop's thread."""

    def __init__(self, store: ScramStore, config: BrokerConfig) -> None:
        """Reads the stored SCRAM credentials and every listener's PLAIN users; raises
        JaasError (a ValueError) naming the key of a malformed JAAS config. Blocks on
        the store's read: construct it before serving."""
        self._store = store
        self._plain_users = _plain_users_by_listener(config)
        self._scram: dict[UserMechanism, ScramCredential] = {
            (user, MECHANISM_TYPES[stored.mechanism]): _from_stored(stored)
            for (user, _), stored in store.all().items()
            if stored.mechanism in MECHANISM_TYPES
        }
        self._altering = asyncio.Lock()
        # What checking a password against a credential costs, spent on a user who has
        # none, so that PLAIN's answer time does not say whether a user exists.
        self._decoy = ScramCredential.from_password(MECHANISMS[0], "", iterations=MIN_ITERATIONS)

    def scram(self, user: str, mechanism: str) -> ScramCredential | None:
        """``user``'s credential of SCRAM ``mechanism`` (by name), or None."""
        return self._scram.get((user, mechanism))

    def check_plain(self, listener: str, user: str, password: str) -> bool:
        """Whether ``password`` is ``user``'s on ``listener`` (its name, any case): the
        listener's PLAIN JAAS users first, compared in constant time; for a user the
        listener does not name, any stored SCRAM credential of theirs. Costs one Hi() per
        credential checked, on the calling thread, unless the JAAS config names the user:
        about 2 ms at 4096 iterations of SHA-256, 25 ms at 16384 of SHA-512."""
        expected = self._plain_users.get(listener.upper(), {}).get(user)
        if expected is not None:
            return hmac.compare_digest(expected.encode("utf-8"), password.encode("utf-8"))
        stored = [
            credential
            for mechanism in MECHANISMS
            if (credential := self.scram(user, mechanism)) is not None
        ]
        if not stored:
            self._decoy.verify_password(password)
            return False
        # Every credential is checked, so the time taken does not say which one matched.
        matches = [credential.verify_password(password) for credential in stored]
        return any(matches)

    def describe(self, users: Sequence[str] | None) -> list[DescribeUserScramCredentialsResult]:
        """DescribeUserScramCredentials' results (KIP-554, as Kafka's ScramImage.describe):
        every user with a credential when ``users`` is None or empty, sorted; otherwise
        one result per name in the order first given, RESOURCE_NOT_FOUND for a user
        without credentials and DUPLICATE_RESOURCE for a name given twice."""
        if not users:
            return [self._describe_user(user) for user in sorted({user for user, _ in self._scram})]
        counts = Counter(users)
        return [
            self._describe_user(user)
            if counts[user] == 1
            else _described(user, ErrorCode.duplicate_resource, DESCRIBED_TWICE + user)
            for user in dict.fromkeys(users)
        ]

    def _describe_user(self, user: str) -> DescribeUserScramCredentialsResult:
        infos = [
            CredentialInfo(mechanism=number, iterations=credential.iterations)
            for number, mechanism in MECHANISM_TYPES.items()
            if (credential := self.scram(user, mechanism)) is not None
        ]
        if not infos:
            return _described(user, ErrorCode.resource_not_found, NOT_FOUND_TO_DESCRIBE + user)
        return _described(user, ErrorCode.none, UNSET_MESSAGE, infos)

    async def alter(
        self,
        deletions: Sequence[ScramCredentialDeletion],
        upsertions: Sequence[ScramCredentialUpsertion],
    ) -> list[AlterUserScramCredentialsResult]:
        """AlterUserScramCredentials' results, one per user in the order first named.

        As Kafka's ScramControlManager.alterCredentials: a user named twice in one request
        (in any mix of deletions and upsertions) gets DUPLICATE_RESOURCE and none of their
        changes; each user's changes are checked on their own (an empty name or a salt or
        salted password that cannot make a credential is UNACCEPTABLE_CREDENTIAL, as are
        iterations outside [4096, 16384]; an unknown mechanism number
        UNSUPPORTED_SASL_MECHANISM; the deletion of a credential that does not exist
        RESOURCE_NOT_FOUND); the changes that pass are written in one fsynced
        transaction, on a worker thread. Requests are applied one at a time."""
        async with self._altering:
            order = dict.fromkeys(
                [deletion.name for deletion in deletions]
                + [upsertion.name for upsertion in upsertions]
            )
            removals, puts, refusals = self._plan(deletions, upsertions)
            await asyncio.to_thread(
                self._store.alter,
                [(user, to_stored(credential)) for user, credential in puts.items()],
                [(user, mechanism_type(mechanism)) for user, mechanism in removals.items()],
            )
            for user, mechanism in removals.items():
                del self._scram[user, mechanism]
            for user, credential in puts.items():
                self._scram[user, credential.mechanism] = credential
        return [_altered(user, refusals.get(user)) for user in order]

    def _plan(
        self,
        deletions: Sequence[ScramCredentialDeletion],
        upsertions: Sequence[ScramCredentialUpsertion],
    ) -> tuple[dict[str, str], dict[str, ScramCredential], dict[str, _Refusal]]:
        """(deletions as user -> mechanism, upsertions as user -> credential, refusals by
        user): Kafka's two passes, a user's first refusal standing."""
        removals: dict[str, str] = {}
        puts: dict[str, ScramCredential] = {}
        refusals: dict[str, _Refusal] = {}
        for deletion in deletions:
            name = deletion.name
            if name in refusals:
                continue
            if removals.pop(name, None) is not None:
                refusals[name] = _ALTERED_TWICE
            elif isinstance(checked := self._deletion(deletion), _Refusal):
                refusals[name] = checked
            else:
                removals[name] = checked
        for upsertion in upsertions:
            name = upsertion.name
            if name in refusals:
                continue
            if removals.pop(name, None) is not None or puts.pop(name, None) is not None:
                refusals[name] = _ALTERED_TWICE
            elif isinstance(made := _upsertion(upsertion), _Refusal):
                refusals[name] = made
            else:
                puts[name] = made
        return removals, puts, refusals

    def _deletion(self, deletion: ScramCredentialDeletion) -> str | _Refusal:
        """The mechanism name of a deletion that can be made, else why not."""
        refusal = _check_name_and_mechanism(deletion.name, deletion.mechanism)
        if refusal is not None:
            return refusal
        mechanism = MECHANISM_TYPES[deletion.mechanism]
        if self.scram(deletion.name, mechanism) is None:
            return _Refusal(ErrorCode.resource_not_found, NOT_FOUND_TO_DELETE)
        return mechanism


def _upsertion(upsertion: ScramCredentialUpsertion) -> ScramCredential | _Refusal:
    """The credential an upsertion sets, else why it cannot be set."""
    refusal = _check_name_and_mechanism(upsertion.name, upsertion.mechanism)
    if refusal is not None:
        return refusal
    if upsertion.iterations < MIN_ITERATIONS:
        return _Refusal(ErrorCode.unacceptable_credential, "Too few iterations")
    if upsertion.iterations > MAX_ITERATIONS:
        return _Refusal(ErrorCode.unacceptable_credential, "Too many iterations")
    # Kafka takes any salt, and answers UNKNOWN_SERVER_ERROR for an empty salted password
    # (its HMAC refuses an empty key); both are refused here as the client's mistake.
    if len(upsertion.salt) < MIN_SALT_BYTES:
        return _Refusal(
            ErrorCode.unacceptable_credential, f"The salt must be at least {MIN_SALT_BYTES} bytes"
        )
    if not upsertion.salted_password:
        return _Refusal(ErrorCode.unacceptable_credential, "The salted password must not be empty")
    return ScramCredential.from_salted_password(
        MECHANISM_TYPES[upsertion.mechanism],
        upsertion.salt,
        upsertion.salted_password,
        upsertion.iterations,
    )


def _check_name_and_mechanism(name: str, mechanism: int) -> _Refusal | None:
    # Kafka's ScramControlManager.validateScramUsernameAndMechanism; the name's length is
    # LMDB's limit on a key.
    if not name:
        return _Refusal(ErrorCode.unacceptable_credential, "Username must not be empty")
    if len(name.encode("utf-8")) > MAX_USER_BYTES:
        return _Refusal(
            ErrorCode.unacceptable_credential,
            f"Username must be at most {MAX_USER_BYTES} bytes of UTF-8",
        )
    if mechanism not in MECHANISM_TYPES:
        return _Refusal(ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")
    return None


def _described(
    user: str,
    code: ErrorCode,
    message: str | None,
    infos: list[CredentialInfo] | None = None,
) -> DescribeUserScramCredentialsResult:
    return DescribeUserScramCredentialsResult(
        user=user, error_code=code, error_message=message, credential_infos=infos or []
    )


def _altered(user: str, refusal: _Refusal | None) -> AlterUserScramCredentialsResult:
    if refusal is None:
        return AlterUserScramCredentialsResult(
            user=user, error_code=ErrorCode.none, error_message=None
        )
    return AlterUserScramCredentialsResult(
        user=user, error_code=refusal.code, error_message=refusal.message
    )


def _from_stored(stored: StoredScramCredential) -> ScramCredential:
    return ScramCredential(
        MECHANISM_TYPES[stored.mechanism],
        stored.salt,
        stored.stored_key,
        stored.server_key,
        stored.iterations,
    )


def to_stored(credential: ScramCredential) -> StoredScramCredential:
    """``credential`` as the metadata store keeps it (its mechanism by number)."""
    return StoredScramCredential(
        mechanism_type(credential.mechanism),
        credential.salt,
        credential.stored_key,
        credential.server_key,
        credential.iterations,
    )


def _plain_users_by_listener(config: BrokerConfig) -> dict[str, dict[str, str]]:
    """Each listener's PLAIN users (by its upper-case name), from its
    ``listener.name.<listener>.plain.sasl.jaas.config``; raises JaasError naming the key."""
    users = {}
    for key, value in config.values.items():
        scoped = listener_key(key)
        if scoped is None or scoped[1] != PLAIN_JAAS_KEY:
            continue
        try:
            users[scoped[0]] = plain_users(value)
        except JaasError as error:
            raise JaasError(f"{key}: {error}") from None
    return users

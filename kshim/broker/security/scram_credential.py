"""A user's SCRAM credential as a server keeps it (RFC 5802 §3, §5.1): the salt, the
iteration count, StoredKey and ServerKey; never the password, nor SaltedPassword::

    SaltedPassword = Hi(password, salt, i)          PBKDF2-HMAC-H, as long as H's digest
    ClientKey      = HMAC(SaltedPassword, "Client Key")
    StoredKey      = H(ClientKey)
    ServerKey      = HMAC(SaltedPassword, "Server Key")

StoredKey checks a client's proof and ServerKey signs the server's answer; neither gives
the password back, nor lets anyone who reads them log in without running the exchange.

As Kafka's ScramFormatter, the password is its UTF-8 bytes, without SASLprep (RFC 4013):
a credential made here and one made by Kafka's admin client from the same password, salt
and count are the same. KIP-554's admin client computes SaltedPassword itself and sends
that (AlterUserScramCredentials' salted_password), so the password never crosses the wire.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass, field

from kshim.protocol.scram_mechanisms import MECHANISMS, SCRAM_SHA_256, SCRAM_SHA_512

HASH_NAMES = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}
# Kafka's bounds (ScramMechanism.minIterations, ScramControlManager.MAX_ITERATIONS); 4096
# is also RFC 7677's minimum and the count Kafka's tools use when none is given.
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = MIN_ITERATIONS
SALT_BYTES = 32  # Kafka's admin client makes 26-byte salts, librdkafka's 64 bytes


def hash_name(mechanism: str) -> str:
    """hashlib's name of the mechanism's hash; raises ValueError for an unknown mechanism."""
    try:
        return HASH_NAMES[mechanism]
    except KeyError:
        raise ValueError(f"{mechanism!r} is not one of {', '.join(MECHANISMS)}") from None


def new_salt() -> bytes:
    return secrets.token_bytes(SALT_BYTES)


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, iterations) of RFC 5802 §2.2, which is PBKDF2 (RFC 8018) with
    HMAC-H and one block. CPU-bound: about 2 ms at 4096 iterations of SHA-256."""
    return hashlib.pbkdf2_hmac(hash_name(mechanism), password.encode("utf-8"), salt, iterations)


@dataclass(frozen=True, slots=True)
class ScramCredential:
    mechanism: str  # SCRAM-SHA-256 or SCRAM-SHA-512
    salt: bytes = field(repr=False)
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int

    @classmethod
    def from_salted_password(
        cls, mechanism: str, salt: bytes, salted: bytes, iterations: int
    ) -> ScramCredential:
        """The credential of SaltedPassword ``salted`` (what KIP-554 sends); raises
        ValueError for an unknown mechanism or an empty ``salted`` (HMAC needs a key)."""
        hash_function = hash_name(mechanism)
        if not salted:
            raise ValueError("the salted password is empty")
        client_key = hmac.digest(salted, b"Client Key", hash_function)
        return cls(
            mechanism,
            salt,
            hashlib.new(hash_function, client_key).digest(),
            hmac.digest(salted, b"Server Key", hash_function),
            iterations,
        )

    @classmethod
    def from_password(
        cls,
        mechanism: str,
        password: str,
        salt: bytes | None = None,
        iterations: int = DEFAULT_ITERATIONS,
    ) -> ScramCredential:
        """The credential of ``password``, salted with ``salt`` (a new random one by
        default); raises ValueError for an unknown mechanism."""
        salt = new_salt() if salt is None else salt
        salted = salted_password(mechanism, password, salt, iterations)
        return cls.from_salted_password(mechanism, salt, salted, iterations)

    def verify_password(self, password: str) -> bool:
        """Whether ``password`` is the one this credential was made from: how SASL/PLAIN
        checks a user known only by a SCRAM credential. Compares in constant time; costs
        one Hi() of this credential's iterations."""
        derived = ScramCredential.from_password(
            self.mechanism, password, self.salt, self.iterations
        )
        return hmac.compare_digest(derived.stored_key, self.stored_key) and hmac.compare_digest(
            derived.server_key, self.server_key
        )

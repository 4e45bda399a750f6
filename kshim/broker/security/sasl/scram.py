"""SCRAM-SHA-256 and SCRAM-SHA-512's server (RFC 5802, RFC 7677; Kafka's KIP-84), on
scramp. Two steps::

    client-first  n,,n=<user>,r=<client nonce>        server-first  r=<nonce>,s=<salt>,i=<count>
    client-final  c=biws,r=<nonce>,p=<client proof>   server-final  v=<server signature>

What Kafka's clients may send and scramp does not take is checked before scramp sees it:

- extensions (``,tokenauth=true,...`` after the nonce): Kafka's ScramLoginModule sends
  ``tokenauth=true`` to log in with a delegation token (KIP-48), which kshim does not
  issue; scramp would call any attribute longer than one letter malformed. Refused,
  saying which.
- an authorisation id (``n,a=<user>,``): Kafka takes one equal to the user; scramp takes
  none. Refused, saying so (Kafka's clients send none).

A user without a credential of the mechanism goes through the exchange as a known one
does, with a salt made from the name and a secret of this process (RFC 5802 §5.1), and
fails at the proof with the message a wrong password gets (Kafka's), so the exchange does
not tell whether a user exists. Malformed messages fail with scramp's reason.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import secrets

from scramp import ScramException, ScramMechanism  # type: ignore[import-untyped]
from scramp.utils import ServerError  # type: ignore[import-untyped]

from kshim.broker.security.credentials import Credentials
from kshim.broker.security.sasl.errors import AuthenticationFailed, token_text
from kshim.broker.security.scram_credential import (
    DEFAULT_ITERATIONS,
    ScramCredential,
    hash_name,
)

# The decoy salts' secret: one per process, so the same unknown name gets the same salt
# for as long as the broker runs.
_DECOY_SECRET = secrets.token_bytes(32)
DELEGATION_TOKEN_EXTENSION = "tokenauth"
AuthInfo = tuple[bytes, bytes, bytes, int]  # what scramp's auth_fn returns


class _Stage(enum.Enum):
    CLIENT_FIRST = "client-first"
    CLIENT_FINAL = "client-final"
    COMPLETE = "complete"
    FAILED = "failed"


class ScramExchange:
    """One connection's SCRAM exchange; not thread-safe (one connection's)."""

    def __init__(self, mechanism: str, credentials: Credentials) -> None:
        """Raises ValueError for a mechanism other than SCRAM-SHA-256 or SCRAM-SHA-512."""
        hash_name(mechanism)
        self._mechanism = mechanism
        self._credentials = credentials
        self._server = ScramMechanism(mechanism).make_server(self._auth_info)
        self._stage = _Stage.CLIENT_FIRST
        self._user = ""
        self._credential: ScramCredential | None = None

    @property
    def complete(self) -> bool:
        return self._stage is _Stage.COMPLETE

    @property
    def user(self) -> str:
        """The user once complete (Kafka's unescaped SCRAM name, ``=2C`` read as ``,``)."""
        return self._user if self.complete else ""

    def step(self, token: bytes) -> bytes:
        """Answers client-first with server-first, then client-final with server-final.
        Raises AuthenticationFailed for a malformed message, a wrong proof (a wrong
        password or an unknown user), and any step after the exchange ended."""
        stage = self._stage
        if stage in (_Stage.COMPLETE, _Stage.FAILED):
            raise AuthenticationFailed(
                f"Authentication failed: the {self._mechanism} exchange has {stage.value}"
            )
        self._stage = _Stage.FAILED  # until this step succeeds
        text = token_text(token, self._mechanism)
        if stage is _Stage.CLIENT_FIRST:
            answer = self._client_first(text)
            self._stage = _Stage.CLIENT_FINAL
        else:
            answer = self._client_final(text)
            self._stage = _Stage.COMPLETE
        return answer.encode("utf-8")

    def _client_first(self, text: str) -> str:
        self._user = _user_of(text)
        self._credential = self._credentials.scram(self._user, self._mechanism)
        try:
            self._server.set_client_first(text)
            server_first: str = self._server.get_server_first()
        except ScramException as error:
            raise AuthenticationFailed(
                f"Authentication failed: invalid SCRAM client-first message: {error.args[0]}"
            ) from None
        return server_first

    def _client_final(self, text: str) -> str:
        self._accept_prefixed_nonce(text)
        try:
            self._server.set_client_final(text)
            server_final: str = self._server.get_server_final()
        except ScramException as error:
            if error.server_error is ServerError.INVALID_PROOF:
                raise self._invalid_credentials() from None
            raise AuthenticationFailed(
                f"Authentication failed: invalid SCRAM client-final message: {error.args[0]}"
            ) from None
        if self._credential is None:  # a decoy's keys are random: never reached
            raise self._invalid_credentials()
        return server_final

    def _accept_prefixed_nonce(self, client_final: str) -> None:
        """librdkafka before 2.6.1 (librdkafka#4895; Debian's kcat links 2.0.2) sends the
        client nonce again in front of the combined nonce in client-final. Kafka 3.8.1-3.9
        accept that (ScramSaslServer compares with endsWith) and kshim does too: the nonce
        still ends with the server's part, so the message is as fresh, and the proof is
        checked over the message as the client sent it."""
        expected = str(self._server.nonce)  # scramp keeps it as its Nonce class
        for attribute in client_final.split(","):
            if attribute.startswith("r="):
                nonce = attribute[2:]
                if nonce != expected and len(nonce) > len(expected) and nonce.endswith(expected):
                    self._server.nonce = type(self._server.nonce)(nonce)
                return

    def _invalid_credentials(self) -> AuthenticationFailed:
        # Kafka's answer to any SaslException, worded so as not to say which check failed.
        return AuthenticationFailed(
            "Authentication failed during authentication due to invalid credentials with "
            f"SASL mechanism {self._mechanism}"
        )

    def _auth_info(self, _saslprepped_name: str) -> AuthInfo:
        """scramp's auth_fn. The user is the name as Kafka reads it (``_user_of``), not
        scramp's SASLprep of it, so that it matches the stored name exactly."""
        credential = self._credential
        if credential is None:
            return self._decoy()
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    def _decoy(self) -> AuthInfo:
        hash_function = hash_name(self._mechanism)
        salt = hmac.digest(_DECOY_SECRET, f"{self._mechanism}\x00{self._user}".encode(), "sha256")
        size = hashlib.new(hash_function).digest_size
        return salt, secrets.token_bytes(size), secrets.token_bytes(size), DEFAULT_ITERATIONS


def _user_of(client_first: str) -> str:
    """The user of a client-first message (RFC 5802 §7: ``gs2-header client-first-bare``),
    its ``=2C`` and ``=3D`` read as ``,`` and ``=``; raises AuthenticationFailed for an
    authorisation id, an extension, or a message without ``n=`` first."""
    fields = client_first.split(",")
    if len(fields) < 4 or not fields[2].startswith("n="):
        raise AuthenticationFailed(
            "Authentication failed: invalid SCRAM client-first message: expected "
            "gs2-header,n=<user>,r=<nonce>"
        )
    if fields[1]:
        raise AuthenticationFailed(
            "Authentication failed: an authorization id in the SCRAM client-first message "
            "is not supported; send none (the user is authorized as themself)"
        )
    # RFC 5802's own attributes are one letter; Kafka's extensions are longer names.
    names = [field.partition("=")[0] for field in fields[4:]]
    extensions = [name for name in names if len(name) > 1]
    if any(name.lower() == DELEGATION_TOKEN_EXTENSION for name in extensions):
        raise AuthenticationFailed(
            "Authentication failed: delegation tokens are not supported (SCRAM extension "
            "tokenauth); log in with a user's SCRAM credential"
        )
    if extensions:
        raise AuthenticationFailed(
            f"Authentication failed: SCRAM extensions are not supported: {', '.join(extensions)}"
        )
    return fields[2][2:].replace("=2C", ",").replace("=3D", "=")

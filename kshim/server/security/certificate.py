"""The principal of a TLS connection: its client certificate's subject, mapped by
``ssl.principal.mapping.rules``; ``User:ANONYMOUS`` when the client sent none (Kafka's
DefaultKafkaPrincipalBuilder)."""

from __future__ import annotations

import ssl

from kshim.broker.security.principal_mapping import Rule, map_subject
from kshim.broker.security.session import ANONYMOUS, user_principal


def subject_name(ssl_object: ssl.SSLObject | ssl.SSLSocket) -> str | None:
    """The peer certificate's subject as RFC 2253 writes it (Java's X500Principal.getName(),
    which Kafka maps), or None without a certificate."""
    der = ssl_object.getpeercert(binary_form=True)
    if not der:
        return None
    # Imported here: only listeners that ask for client certificates need it.
    from cryptography import x509

    return x509.load_der_x509_certificate(der).subject.rfc4514_string()


def certificate_principal(ssl_object: ssl.SSLObject | ssl.SSLSocket, rules: list[Rule]) -> str:
    """The connection's principal; raises NoMatchingRule."""
    name = subject_name(ssl_object)
    return ANONYMOUS if name is None else user_principal(map_subject(rules, name))

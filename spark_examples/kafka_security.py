"""The pipeline's Kafka client settings: how the capture and the apply job reach a broker
that wants TLS or SASL, taking what any Kafka client takes.

``--kafka-config FILE`` names a Kafka client properties file, and ``--kafka-option
KEY=VALUE`` (repeatable) sets one property, over the file's: security.protocol,
sasl.mechanism, sasl.jaas.config, ssl.truststore.location, ssl.keystore.location, ... in
the Java client's names or librdkafka's (``kshim.client.security`` lists them; anything
else is refused). Each client then gets them in its own names:

- Spark's Kafka source, whose Java consumer takes them as ``kafka.<name>`` options:
  ``kafka.security.protocol``, ``kafka.sasl.mechanism``, ``kafka.sasl.jaas.config``,
  ``kafka.ssl.truststore.type=PEM``, ``kafka.ssl.truststore.location``, ...
- the capture's confluent-kafka producer and admin client (librdkafka): ``sasl.mechanisms``,
  ``sasl.username``, ``sasl.password``, ``ssl.ca.location``, ``ssl.certificate.location``, ...

A file named by a setting is read by the client that uses it: under Spark by each
executor's consumer, so it must be at that path on every executor (or give the PEM inline,
``ssl.truststore.certificates``, which travels with the options). Kafka's Java client takes
a PEM private key in PKCS#8 only (``BEGIN PRIVATE KEY`` or ``BEGIN ENCRYPTED PRIVATE KEY``).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from kshim.client.jaas import PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE
from kshim.client.java_properties import load_client_properties
from kshim.client.security import ClientSecurity, ClientSecurityError, client_security
from kshim.client.tls import Pem, TlsSettings

SPARK_OPTION_PREFIX = "kafka."
CONFIG_HELP = (
    "a Kafka client properties file: security.protocol, sasl.mechanism, sasl.jaas.config, "
    "ssl.truststore.location, ... (Java client or librdkafka names)"
)
OPTION_HELP = "one Kafka client property, over --kafka-config's (repeatable)"


def add_kafka_arguments(parser: argparse.ArgumentParser) -> None:
    """--kafka-config FILE and --kafka-option KEY=VALUE on ``parser``."""
    parser.add_argument("--kafka-config", metavar="FILE", help=CONFIG_HELP)
    parser.add_argument(
        "--kafka-option",
        action="append",
        default=[],
        type=_property,
        metavar="KEY=VALUE",
        help=OPTION_HELP,
    )


def _property(text: str) -> tuple[str, str]:
    key, equals, value = text.partition("=")
    if not key.strip() or not equals:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key.strip(), value


def kafka_security(
    parser: argparse.ArgumentParser, config: str | None, options: Sequence[tuple[str, str]]
) -> ClientSecurity:
    """The security that --kafka-config and --kafka-option ask for; exits through
    ``parser.error`` (status 2, one line) when they cannot be used. TLS files are read once
    here, so that a missing one is said before anything starts."""
    properties: dict[str, str] = {}
    try:
        if config is not None:
            properties.update(load_client_properties(config))
        properties.update(options)
        security = client_security(properties)
        security.ssl_context()
    except OSError as error:
        parser.error(f"cannot read --kafka-config {config}: {error.strerror or error}")
    except (ClientSecurityError, UnicodeDecodeError) as error:
        parser.error(f"Kafka client settings: {error}")
    return security


def java_client_properties(security: ClientSecurity) -> dict[str, str]:
    """The Java client's properties for ``security`` (Spark's source and sink take each as
    ``kafka.<name>``). PEM stores are said to be PEM: the Java client's default is JKS."""
    properties = {"security.protocol": security.protocol}
    if security.tls is not None:
        properties |= _java_tls(security.tls)
    if security.mechanism is not None:
        module = PLAIN_LOGIN_MODULE if security.mechanism == "PLAIN" else SCRAM_LOGIN_MODULE
        username, password = _jaas_quoted(security.username), _jaas_quoted(security.password)
        properties["sasl.mechanism"] = security.mechanism
        properties["sasl.jaas.config"] = (
            f"{module} required username={username} password={password};"
        )
    return properties


def _java_tls(tls: TlsSettings) -> dict[str, str]:
    properties = {"ssl.endpoint.identification.algorithm": "https" if tls.check_hostname else ""}
    if tls.trusted is not None:
        properties["ssl.truststore.type"] = "PEM"
        properties |= _pem_setting(
            tls.trusted, "ssl.truststore.location", "ssl.truststore.certificates"
        )
    if tls.chain is not None and tls.key is not None:
        properties["ssl.keystore.type"] = "PEM"
        if tls.chain == tls.key and tls.chain.path is not None:
            properties["ssl.keystore.location"] = tls.chain.path
        else:
            # Java has no separate key and certificate files: librdkafka's are given inline.
            properties["ssl.keystore.key"] = "".join(tls.key.blocks())
            properties["ssl.keystore.certificate.chain"] = "".join(tls.chain.blocks())
    if tls.key_password is not None:
        properties["ssl.key.password"] = tls.key_password
    return properties


def _pem_setting(pem: Pem, file_name: str, text_name: str) -> dict[str, str]:
    """``file_name`` for PEM in a file, else ``text_name`` with the PEM itself."""
    if pem.path is not None:
        return {file_name: pem.path}
    return {text_name: "".join(pem.blocks())}


def _jaas_quoted(value: str | None) -> str:
    """``value`` as a JAAS string: quoted, with backslashes and quotes escaped (Kafka's
    JaasConfig reads it with Java's StreamTokenizer)."""
    escaped = (value or "").replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def spark_kafka_options(security: ClientSecurity) -> dict[str, str]:
    """``security`` as Spark's Kafka source and sink options: ``kafka.<Java client name>``."""
    return {
        SPARK_OPTION_PREFIX + name: value
        for name, value in java_client_properties(security).items()
    }


def librdkafka_settings(security: ClientSecurity) -> dict[str, str]:
    """librdkafka's settings for ``security`` (confluent-kafka's Producer, Consumer and
    AdminClient). A PEM keystore file holding both key and chain is given as both the
    certificate and the key file: OpenSSL takes from each file the blocks it wants."""
    settings = {"security.protocol": security.protocol}
    tls = security.tls
    if tls is not None:
        settings["ssl.endpoint.identification.algorithm"] = (
            "https" if tls.check_hostname else "none"
        )
        if tls.trusted is not None:
            settings |= _pem_setting(tls.trusted, "ssl.ca.location", "ssl.ca.pem")
        if tls.chain is not None and tls.key is not None:
            settings |= _pem_setting(tls.chain, "ssl.certificate.location", "ssl.certificate.pem")
            settings |= _pem_setting(tls.key, "ssl.key.location", "ssl.key.pem")
        if tls.key_password is not None:
            settings["ssl.key.password"] = tls.key_password
    if security.mechanism is not None:
        settings["sasl.mechanisms"] = security.mechanism
        settings["sasl.username"] = security.username or ""
        settings["sasl.password"] = security.password or ""
    return settings

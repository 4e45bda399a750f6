"""``kshim gateway``'s security towards its clients: what its ports speak (TLS, SASL) with
the broker's listener settings (``--set``), and the users it logs clients in with
(``--data-dir``: the SCRAM credentials of a kshim data directory's metadata store, as
``kshim users add --data-dir`` writes them). The directory is locked while the gateway
runs, as a broker locks its own, so that an offline change cannot go unseen; a running
gateway's users are changed through it (AlterUserScramCredentials, ``kshim users``)."""

from __future__ import annotations

import argparse
import os
import ssl
from dataclasses import dataclass

from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.config.validators import ConfigError
from kshim.broker.security.credentials import Credentials
from kshim.cli.errors import (
    CommandFailed,
    OneLineArgumentParser,
    UsageError,
    data_directory_problem,
)
from kshim.cli.user_store import METADATA_DIRECTORY
from kshim.client.jaas import JaasError
from kshim.gateway.client_login import GatewayUsers
from kshim.server.security.tls import TlsConfigError, server_context
from kshim.storage.files.data_directory_lock import DataDirectoryInUse, DataDirectoryLock
from kshim.storage.meta.lmdb_types import LmdbFailed
from kshim.storage.meta.metadata import MetadataStore

LISTENER_SECURITY = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# Per-request authorisation of relayed requests is not built yet: the cluster's ACLs apply
# to the gateway's own login.
NO_AUTHORIZER = (
    "the gateway does not enforce ACLs yet: leave authorizer.class.name unset (the "
    "cluster's ACLs apply to the gateway's own login, --upstream-config)"
)


def add_client_security_options(gateway: OneLineArgumentParser) -> None:
    gateway.add_argument(
        "--listener-security",
        choices=LISTENER_SECURITY,
        default="PLAINTEXT",
        help="what clients speak to the gateway: SSL with the broker's ssl.* settings (--set); "
        "SASL_PLAINTEXT or SASL_SSL: clients log in to the gateway (its users: --data-dir, "
        "the listener's PLAIN JAAS setting), which logs in to the cluster as itself; with "
        "PLAINTEXT or SSL their SASL is relayed to the cluster (default PLAINTEXT)",
    )
    gateway.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a listener setting, as the broker's (ssl.keystore.location, "
        "sasl.enabled.mechanisms, listener.name.sasl_plaintext.plain.sasl.jaas.config, ...)",
    )
    gateway.add_argument(
        "--data-dir",
        help="with a SASL listener: the kshim data directory whose SCRAM users log in "
        "(made if missing; kshim users add --data-dir writes there while the gateway is "
        "stopped, kshim users --bootstrap-server through it while it runs)",
    )


@dataclass(slots=True)
class ListenerSecurity:
    """What the gateway's ports speak, and what it holds open for that until ``close``."""

    tls: ssl.SSLContext | None = None
    users: GatewayUsers | None = None
    _store: MetadataStore | None = None
    _lock: DataDirectoryLock | None = None

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
        if self._lock is not None:
            self._lock.release()


def client_security(arguments: argparse.Namespace) -> ListenerSecurity:
    """The clients' side of ``arguments``; raises UsageError, CommandFailed."""
    protocol = arguments.listener_security
    if protocol == "PLAINTEXT":
        return ListenerSecurity()
    config = _listener_config(arguments, protocol)
    tls = _tls(config, protocol) if protocol.endswith("SSL") else None
    if not protocol.startswith("SASL_"):
        return ListenerSecurity(tls)
    if config.values["authorizer.class.name"].strip():
        raise UsageError(NO_AUTHORIZER)
    if not arguments.data_dir:
        raise UsageError(f"--listener-security {protocol} needs --data-dir (the users' store)")
    lock, store = _opened(arguments.data_dir)
    try:
        credentials = Credentials(store.scram, config)
    except (JaasError, LmdbFailed) as error:
        store.close()
        lock.release()
        raise UsageError(str(error)) from error
    return ListenerSecurity(tls, GatewayUsers(config, credentials, protocol), store, lock)


def _listener_config(arguments: argparse.Namespace, protocol: str) -> BrokerConfig:
    """The broker's settings of one listener, ``protocol``, from ``--set``."""
    settings = {"listeners": f"{protocol}://{arguments.listen}"}
    for entry in arguments.set:
        key, separator, value = entry.partition("=")
        if not separator:
            raise UsageError(f"--set {entry}: expected KEY=VALUE")
        settings[key.strip()] = value.strip()
    try:
        return BrokerConfig.load([settings])
    except ConfigError as error:
        raise UsageError(str(error)) from error


def _tls(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    try:
        return server_context(config, listener)
    except TlsConfigError as error:
        raise UsageError(str(error)) from error


def _opened(data_dir: str) -> tuple[DataDirectoryLock, MetadataStore]:
    try:
        os.makedirs(data_dir, exist_ok=True)
        lock = DataDirectoryLock.acquire(data_dir)
    except DataDirectoryInUse as error:
        raise CommandFailed(str(error)) from None
    except OSError as error:
        raise CommandFailed(data_directory_problem(data_dir, error)) from None
    try:
        return lock, MetadataStore(os.path.join(data_dir, METADATA_DIRECTORY))
    except (LmdbFailed, OSError) as error:
        lock.release()
        raise CommandFailed(f"cannot open the users' store in {data_dir}: {error}") from None

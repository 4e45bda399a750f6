"""``python -m kshim.healthcheck [HOST:PORT] [URL ...] [--command-config FILE]``: exits 0
when a Kafka broker answers at HOST:PORT and every readiness URL (the broker's
``/healthz``) answers 200. A listener that speaks TLS or SASL is asked with the Kafka client
properties of FILE (``security.protocol=SSL`` and its truststore).

A health check that speaks the protocol rather than probing the port: it sends
ApiVersions v0 (request header v1, empty body) and requires a well-formed answer with the
same correlation id, error code 0 and ApiVersions itself among the listed APIs
(https://kafka.apache.org/protocol#The_Messages_ApiVersions). Used by the Docker image's
HEALTHCHECK, one blocking round trip through ``kshim.client.wire`` bounded by a timeout
(the image installs kshim with its dependencies, kio among them).
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.request
from http import HTTPStatus

from kshim.client.frames import MalformedResponseError
from kshim.client.java_properties import load_client_properties
from kshim.client.security import ClientSecurity, ClientSecurityError, client_security
from kshim.client.wire import WireConnection
from kshim.protocol.apis import API_VERSIONS_KEY

DEFAULT_ADDRESS = "127.0.0.1:9092"
DEFAULT_HOST = "127.0.0.1"
TIMEOUT_S = 5.0  # under the image's HEALTHCHECK --timeout of 6 s
CLIENT_ID = "kshim-healthcheck"
MAX_RESPONSE_BYTES = 1 << 16  # ApiVersions v0 lists a few dozen 6-byte entries


class UnhealthyError(Exception):
    """The broker did not answer, or answered something that is not an ApiVersions v0 reply."""


def probe(
    host: str, port: int, timeout_s: float = TIMEOUT_S, security: ClientSecurity | None = None
) -> list[int]:
    """Sends ApiVersions v0 and returns the advertised API keys; raises UnhealthyError."""
    try:
        with WireConnection(
            host,
            port,
            timeout_s,
            client_id=CLIENT_ID,
            max_response_bytes=MAX_RESPONSE_BYTES,
            security=security,
        ) as connection:
            response = connection.call(API_VERSIONS_KEY, 0)
    except (OSError, MalformedResponseError) as error:
        raise UnhealthyError(f"{host}:{port}: {error}") from error
    if response.error_code != 0:
        raise UnhealthyError(f"ApiVersions error code {response.error_code!r}")
    keys = [int(entry.api_key) for entry in response.api_keys]
    if API_VERSIONS_KEY not in keys:
        raise UnhealthyError("ApiVersions is not among the advertised APIs")
    return keys


def ready(url: str, timeout_s: float = TIMEOUT_S) -> dict[str, str]:
    """The ``key=value`` lines ``url`` (the metrics endpoint's /healthz, which answers 503
    until the broker serves and while its event loop does not answer) names its broker
    with; raises UnhealthyError unless it answers 200."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as answer:
            status = answer.status
            body = answer.read(MAX_RESPONSE_BYTES).decode("utf-8", "replace")
    except urllib.error.HTTPError as error:
        raise UnhealthyError(f"{url}: {error.code} {error.reason}") from error
    except (OSError, ValueError) as error:
        raise UnhealthyError(f"{url}: {error}") from error
    if status != HTTPStatus.OK:
        raise UnhealthyError(f"{url}: {status}")
    lines = body.splitlines()[1:]
    return dict(line.partition("=")[::2] for line in lines if "=" in line)


def check_same_broker(url: str, identity: dict[str, str], port: int) -> None:
    """Raises UnhealthyError when the readiness at ``url`` is of a broker that does not
    listen on ``port``: another broker's endpoint on the same machine (the first one to
    bind the default metrics port) would otherwise vouch for this one. An endpoint that
    names no listeners (not kshim's) is taken at its word."""
    listeners = identity.get("listeners")
    if not listeners:
        return
    ports = {address.rpartition(":")[2] for address in listeners.split(",")}
    if str(port) not in ports:
        raise UnhealthyError(
            f"{url} is the readiness of another broker (pid {identity.get('pid', '?')}, "
            f"listening on {listeners}), not of the one on port {port}"
        )


def main(argv: list[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    properties = None
    if "--command-config" in arguments:
        at = arguments.index("--command-config")
        properties = arguments[at + 1] if at + 1 < len(arguments) else ""
        del arguments[at : at + 2]
    urls = [argument for argument in arguments if argument.startswith(("http://", "https://"))]
    addresses = [argument for argument in arguments if argument not in urls]
    host, _, port = (addresses[0] if addresses else DEFAULT_ADDRESS).rpartition(":")
    try:
        security = (
            None if properties is None else client_security(load_client_properties(properties))
        )
        keys = probe(host or DEFAULT_HOST, int(port), security=security)
        for url in urls:
            check_same_broker(url, ready(url), int(port))
    except (UnhealthyError, ValueError, OSError, ClientSecurityError) as error:
        print(f"unhealthy: {error}", file=sys.stderr)
        return 1
    print(f"healthy: {len(keys)} APIs advertised" + (", ready" if urls else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())

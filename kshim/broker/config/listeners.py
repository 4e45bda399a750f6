"""Kafka's listener settings: ``listeners``, ``advertised.listeners`` and
``listener.security.protocol.map``.

``listeners=PLAINTEXT://:9092,SASL_SSL://0.0.0.0:9094`` names each listener before its
``://``; the map says which security protocol a name speaks (Kafka's default map names
each protocol after itself). A bare ``host:port`` is one PLAINTEXT listener, as kshim's
``--listen`` has always taken.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_PORT = 65535
DEFAULT_LISTENER = "PLAINTEXT"


class ListenerError(ValueError):
    """A listener setting is malformed."""


@dataclass(frozen=True, slots=True)
class Listener:
    name: str  # upper case, as Kafka compares listener names
    security_protocol: str
    host: str  # "0.0.0.0" for every interface
    port: int  # 0: the operating system picks a free port

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")


def protocol_map(value: str) -> dict[str, str]:
    """``NAME:PROTOCOL,...`` as a dict (names upper case)."""
    mapping = {}
    for entry in (part.strip() for part in value.split(",") if part.strip()):
        name, _, protocol = entry.partition(":")
        mapping[name.strip().upper()] = protocol.strip()
    return mapping


def parse_endpoint(text: str) -> tuple[str, str, int]:
    """(name, host, port) of ``NAME://host:port``, ``[::1]:port`` or ``host:port``."""
    name = DEFAULT_LISTENER
    address = text.strip()
    if "://" in address:
        scheme, address = address.split("://", 1)
        name = scheme.strip().upper()
        if not name:
            raise ListenerError(f"listener {text!r} has no name before ://")
    host, separator, port = address.rpartition(":")
    if not separator or not (port.isascii() and port.isdigit()):
        raise ListenerError(f"listener {text!r} is not host:port")
    if int(port) > MAX_PORT:
        # Port 0 is valid: the operating system picks a free port, which the broker reports.
        raise ListenerError(f"{text!r}: the port must be 0-{MAX_PORT} (0 for any free port)")
    return name, host.strip("[]"), int(port)


def parse_listeners(value: str, protocols: str) -> list[Listener]:
    """Every listener of a ``listeners`` value, in order; raises ListenerError."""
    mapping = protocol_map(protocols)
    listeners: list[Listener] = []
    for text in (part for part in value.split(",") if part.strip()):
        name, host, port = parse_endpoint(text)
        if name not in mapping:
            raise ListenerError(
                f"listener {name} is not in listener.security.protocol.map "
                f"({', '.join(sorted(mapping))})"
            )
        if any(listener.name == name for listener in listeners):
            raise ListenerError(f"listener {name} is named twice in listeners")
        if port and any(listener.port == port for listener in listeners):
            raise ListenerError(f"port {port} is given to two listeners")
        listeners.append(Listener(name, mapping[name], host or "0.0.0.0", port))
    if not listeners:
        raise ListenerError("listeners names no listener")
    return listeners


def parse_advertised(value: str, listeners: list[Listener]) -> dict[str, tuple[str, int]]:
    """The address each listener is advertised at: its ``advertised.listeners`` entry, else
    where it listens (all interfaces advertise as loopback, the one address sure to work
    on this machine)."""
    advertised: dict[str, tuple[str, int]] = {}
    names = {listener.name for listener in listeners}
    for text in (part for part in value.split(",") if part.strip()):
        name, host, port = parse_endpoint(text)
        if name not in names:
            raise ListenerError(f"advertised listener {name} is not in listeners")
        advertised[name] = (host, port)
    for listener in listeners:
        if listener.name not in advertised:
            host = listener.host if listener.host not in ("0.0.0.0", "::") else "127.0.0.1"
            advertised[listener.name] = (host, listener.port)
    return advertised

"""``kshim gateway --full``: the options of the full-data views served on a Kafka cluster,
and the pieces they make (kshim/gateway/full/)."""

from __future__ import annotations

import argparse
import tempfile

from kshim.cli.errors import OneLineArgumentParser
from kshim.client.security import ClientSecurity
from kshim.client.wire import parse_bootstrap
from kshim.gateway.addresses import GatewayPorts
from kshim.gateway.delay.upstream import Upstream
from kshim.gateway.full.index import ViewIndex
from kshim.gateway.full.ownership import ViewOwnership, ViewSettings
from kshim.gateway.full.service import GatewayViews

DEFAULT_GROUP = ViewSettings().group_id
DEFAULT_SESSION_TIMEOUT_MS = ViewSettings().session_timeout_ms


def add_view_options(gateway: OneLineArgumentParser) -> None:
    gateway.add_argument(
        "--full",
        action="store_true",
        help="serve T.full, the full-data view of each topic T, with the other gateways "
        "given --full and the same --full-group (docs/gateway.md)",
    )
    gateway.add_argument(
        "--full-group",
        default=DEFAULT_GROUP,
        help=f"the upstream consumer group sharing the views (default {DEFAULT_GROUP})",
    )
    gateway.add_argument(
        "--full-session-timeout-ms",
        type=int,
        default=DEFAULT_SESSION_TIMEOUT_MS,
        help="how soon the views of a gateway that died move to the others "
        f"(default {DEFAULT_SESSION_TIMEOUT_MS})",
    )
    gateway.add_argument(
        "--full-dir",
        help="where this gateway keeps the views it owns (default: a new temporary "
        "directory, removed at exit); a view kept there is resumed when its partition is "
        "owned again, if that gives what a rebuild from the cluster would",
    )


def gateway_views(
    arguments: argparse.Namespace, ports: GatewayPorts, security: ClientSecurity | None
) -> GatewayViews | None:
    """The views' pieces when ``--full`` is given: this gateway's index, and its membership
    of the group that says which gateway owns which partition."""
    if not arguments.full:
        return None
    directory = arguments.full_dir or tempfile.mkdtemp(prefix="kshim-gateway-full-")
    upstream = [parse_bootstrap(entry) for entry in arguments.upstream.split(",")]
    index = ViewIndex(directory, upstream, security)
    session_timeout_ms = arguments.full_session_timeout_ms
    settings = ViewSettings(
        group_id=arguments.full_group,
        session_timeout_ms=session_timeout_ms,
        heartbeat_interval_ms=max(session_timeout_ms // 3, 1),
    )
    ownership = ViewOwnership(
        Upstream(arguments.upstream, security),
        (ports.host, ports.bootstrap_port),
        index.own,
        index.release,
        settings,
    )
    return GatewayViews(index, ownership, None if arguments.full_dir else directory)

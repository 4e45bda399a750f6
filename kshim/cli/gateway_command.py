"""``kshim gateway``: relays Kafka clients to an Apache Kafka cluster until SIGINT or
SIGTERM (kshim/gateway/, docs/gateway.md)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from typing import TYPE_CHECKING

from kshim.broker.config.keys import BROKER_DEFAULTS, broker_validator
from kshim.broker.transactions.review_hooks import ReviewHookError, load_review_hook
from kshim.cli.admin_options import Commands, add_command, bootstrap_argument, command_security
from kshim.cli.argument_types import accepted_text
from kshim.cli.config_sources import listener_argument
from kshim.cli.errors import CommandFailed, OneLineArgumentParser, UsageError
from kshim.cli.event_loop import run_on
from kshim.cli.gateway_security import add_client_security_options, client_security
from kshim.cli.gateway_views import add_view_options, gateway_views
from kshim.client.errors import reason
from kshim.client.security import ClientSecurity
from kshim.client.transaction_admin import TransactionAdmin
from kshim.client.wire import parse_bootstrap
from kshim.gateway.addresses import GatewayPorts
from kshim.gateway.delay.dispatcher import DelayDispatcher
from kshim.gateway.delay.upstream import (
    DEFAULT_GROUP,
    DEFAULT_SESSION_TIMEOUT_MS,
    DelaySettings,
    Upstream,
)
from kshim.gateway.delay_screen import DelayRules
from kshim.gateway.gateway import Gateway, UpstreamUnavailable
from kshim.gateway.review import DEFAULT_RETRY_MS, GatewayReviewer, GatewayReviewSettings
from kshim.gateway.review_share import DEFAULT_GROUP as REVIEW_GROUP
from kshim.gateway.review_share import ReviewShare, ReviewShareSettings

if TYPE_CHECKING:
    from kshim.server.metrics.endpoint import MetricsEndpoint

GATEWAY_PROGRAM = "kshim gateway"
DEFAULT_GATEWAY_LISTEN = "127.0.0.1:19092"


DELAY_MAX_KEY = "kshim.delay.max.ms"


def add_gateway_parser(commands: Commands) -> None:
    gateway = add_command(
        commands, "gateway", "relay Kafka clients to an Apache Kafka cluster", GATEWAY_PROGRAM
    )
    gateway.add_argument(
        "--upstream",
        required=True,
        type=_upstream_argument,
        help="the cluster's bootstrap addresses, host:port[,host:port...]",
    )
    gateway.add_argument(
        "--listen",
        default=DEFAULT_GATEWAY_LISTEN,
        type=listener_argument,
        help=f"the bootstrap host:port clients connect to (default {DEFAULT_GATEWAY_LISTEN})",
    )
    gateway.add_argument(
        "--broker-port-base",
        type=int,
        help="upstream broker N is reached at this port + N (default: the --listen port + 1)",
    )
    gateway.add_argument(
        "--advertised-host", help="the host answers name for the gateway (default: --listen's)"
    )
    _add_security_options(gateway)
    _add_review_options(gateway)
    _add_delay_options(gateway)
    add_view_options(gateway)
    gateway.add_argument(
        "--metrics-listen",
        type=listener_argument,
        help="host:port to serve /metrics and /healthz on (default: none)",
    )
    gateway.add_argument(
        "--event-loop",
        choices=("uvloop", "asyncio"),
        default="uvloop",
        help="the event loop to run on, as the broker's kshim.event.loop (default uvloop)",
    )


def _add_security_options(gateway: OneLineArgumentParser) -> None:
    gateway.add_argument(
        "--upstream-config",
        metavar="FILE",
        help="a Kafka client properties file: how the gateway connects to the cluster "
        "(security.protocol, TLS trust, its own SASL login)",
    )
    add_client_security_options(gateway)


def _add_review_options(gateway: OneLineArgumentParser) -> None:
    gateway.add_argument(
        "--review-hook",
        help="decides the cluster's overdue transactions: module:function or an http(s) URL",
    )
    gateway.add_argument(
        "--review-retry-ms",
        type=int,
        default=DEFAULT_RETRY_MS,
        help="between reviews the hook answers 'unknown' (default %(default)s)",
    )
    gateway.add_argument(
        "--review-group",
        default=REVIEW_GROUP,
        help="the upstream consumer group the reviewing gateways share the transactions in "
        "(default %(default)s)",
    )


def _add_delay_options(gateway: OneLineArgumentParser) -> None:
    gateway.add_argument(
        "--delay",
        action="store_true",
        help="deliver the records of the cluster's T.delay topics to T when due, with the "
        "other gateways given --delay and the same --delay-group (docs/gateway.md)",
    )
    gateway.add_argument(
        "--delay-group",
        default=DEFAULT_GROUP,
        help="the upstream consumer group the delivering gateways share (default %(default)s)",
    )
    gateway.add_argument(
        "--delay-topics",
        help="the T.delay topics to deliver, comma-separated (default: every *.delay topic)",
    )
    gateway.add_argument(
        "--delay-session-timeout-ms",
        type=int,
        default=DEFAULT_SESSION_TIMEOUT_MS,
        help="how soon the other gateways take over from one that died (default %(default)s)",
    )
    gateway.add_argument(
        "--delay-max-ms",
        type=_delay_max_argument,
        default=int(BROKER_DEFAULTS[DELAY_MAX_KEY]),
        help="how far ahead a record produced to T.delay may be due: the broker's "
        f"{DELAY_MAX_KEY} (default %(default)s, two years)",
    )


def _delay_max_argument(text: str) -> int:
    """argparse type of --delay-max-ms: what the broker's setting of that name accepts."""
    validate = broker_validator(DELAY_MAX_KEY)
    assert validate is not None
    return int(accepted_text(text, validate))


def _upstream_argument(text: str) -> str:
    for address in text.split(","):
        bootstrap_argument(address)
    return text


def run_gateway(arguments: argparse.Namespace) -> None:
    host, port = parse_bootstrap(arguments.listen)
    if port == 0:
        raise UsageError("--listen needs a port: it fixes every broker's gateway port")
    base = arguments.broker_port_base if arguments.broker_port_base is not None else port + 1
    ports = GatewayPorts(arguments.advertised_host or host, port, base)
    upstream = [parse_bootstrap(address) for address in arguments.upstream.split(",")]
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    security = command_security(arguments.upstream_config)
    reviewer = _reviewer(arguments, security)
    listener = client_security(arguments)
    try:
        rules = DelayRules(max_delay_ms=arguments.delay_max_ms)
        views = gateway_views(arguments, ports, security)
        gateway = Gateway(
            upstream, host, ports, reviewer, security, listener.tls, rules, views, listener.users
        )
        dispatcher = _dispatcher(arguments, security) if arguments.delay else None
        run_on(arguments.event_loop, _serve(gateway, arguments.metrics_listen, dispatcher))
    finally:
        listener.close()


def _dispatcher(arguments: argparse.Namespace, security: ClientSecurity | None) -> DelayDispatcher:
    session_timeout_ms = arguments.delay_session_timeout_ms
    topics = tuple(filter(None, (arguments.delay_topics or "").split(",")))
    settings = DelaySettings(
        group_id=arguments.delay_group,
        topics=topics,
        session_timeout_ms=session_timeout_ms,
        heartbeat_interval_ms=max(session_timeout_ms // 3, 1),
    )
    return DelayDispatcher(Upstream(arguments.upstream, security), settings)


def _reviewer(
    arguments: argparse.Namespace, security: ClientSecurity | None
) -> GatewayReviewer | None:
    try:
        hook = load_review_hook(arguments.review_hook or "")
    except ReviewHookError as error:
        raise UsageError(str(error)) from error
    if hook is None:
        return None
    bootstrap = arguments.upstream
    settings = GatewayReviewSettings(retry_ms=arguments.review_retry_ms)
    share = ReviewShare(
        Upstream(bootstrap, security), ReviewShareSettings(group_id=arguments.review_group)
    )
    return GatewayReviewer(
        lambda: TransactionAdmin(bootstrap, security=security), hook, settings, share=share
    )


async def _serve(
    gateway: Gateway, metrics_listen: str | None, dispatcher: DelayDispatcher | None
) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signal_number in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signal_number, stop.set)
    try:
        await gateway.start()
    except OSError as error:
        await gateway.stop()
        raise CommandFailed(f"cannot listen: {reason(error)}") from error
    except UpstreamUnavailable as error:
        await gateway.stop()
        raise CommandFailed(str(error)) from error
    if dispatcher is not None:
        await _start_dispatcher(gateway, dispatcher)
    if gateway.views is not None:
        print(f"kshim gateway: serving full-data views (group "
              f"{gateway.views.ownership.settings.group_id})", flush=True)  # fmt: skip
    brokers = ", ".join(
        f"broker {node_id} at {gateway.ports.host}:{gateway.ports.port_of(node_id)}"
        for node_id in sorted(gateway.topology.brokers)
    )
    print(
        f"kshim gateway: listening on {gateway.listen_host}:{gateway.ports.bootstrap_port}, "
        f"relaying to {gateway.describe_upstream()} ({brokers})",
        flush=True,
    )
    try:
        endpoint = _serve_metrics(gateway, metrics_listen, dispatcher) if metrics_listen else None
    except CommandFailed:
        await gateway.stop()
        raise
    await stop.wait()
    if endpoint is not None:
        endpoint.stop()
    if dispatcher is not None:
        await dispatcher.stop()
    await gateway.stop()


async def _start_dispatcher(gateway: Gateway, dispatcher: DelayDispatcher) -> None:
    try:
        await dispatcher.start()
    except Exception as error:  # aiokafka's errors: the cluster refused or did not answer
        await gateway.stop()
        raise CommandFailed(f"cannot start delayed delivery: {error}") from error
    print(f"kshim gateway: delivering delayed records (group {dispatcher.settings.group_id})",
          flush=True)  # fmt: skip


def _serve_metrics(
    gateway: Gateway, listen: str, dispatcher: DelayDispatcher | None
) -> MetricsEndpoint:
    # Imported only when asked for: prometheus_client and its HTTP server.
    from kshim.gateway.metrics import serve_metrics

    host, port = parse_bootstrap(listen)
    try:
        endpoint, (bound_host, bound_port) = serve_metrics(gateway, host, port, dispatcher)
    except OSError as error:
        raise CommandFailed(f"cannot serve metrics on {listen}: {reason(error)}") from error
    print(f"kshim gateway: metrics on http://{bound_host}:{bound_port}/metrics", flush=True)
    return endpoint

"""How the route table composes handlers with their access rules: every route has one but
those every client may call, a broker without an authoriser or a super user reaches the
handler itself (not even a coroutine of the guard's own), and anyone else goes through the
check."""

from __future__ import annotations

from pathlib import Path

from kshim.api.records import produce
from kshim.api.routes import ROUTES
from kshim.broker.broker import Broker
from kshim.broker.security.session import ANONYMOUS
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.describe_groups import DescribeGroupsRequest
from tests.broker.access.support import (
    ADMIN,
    ALICE,
    GROUP,
    TOPIC,
    call,
    context,
    open_broker,
    produce_request,
)

PRODUCE, DESCRIBE_GROUPS = 0, 15


def test_every_route_has_an_access_rule_but_those_every_client_may_call() -> None:
    unchecked = sorted(key for key in ROUTES.api_keys() if not ROUTES[key].checked)
    assert unchecked == [17, 18, 36]  # SaslHandshake, ApiVersions, SaslAuthenticate


async def test_without_an_authoriser_the_handler_runs_as_it_is(tmp_path: Path) -> None:
    broker = await open_broker(tmp_path, **{"authorizer.class.name": ""})
    try:
        await broker.topics.create(TOPIC, 1, {})
        pending = ROUTES[PRODUCE].handle(produce_request(TOPIC), context(broker, PRODUCE, 9))
        # The handler's own coroutine: the guard added no frame and made no checks object.
        assert pending.cr_code is produce.handle.__code__  # type: ignore[attr-defined]
        answer = await pending
        assert answer is not None
    finally:
        await broker.close()


async def test_a_super_user_reaches_the_handler_itself(broker: Broker) -> None:
    pending = ROUTES[PRODUCE].handle(produce_request(TOPIC), context(broker, PRODUCE, 9, ADMIN))
    assert pending.cr_code is produce.handle.__code__  # type: ignore[attr-defined]
    await pending
    other = ROUTES[PRODUCE].handle(produce_request(TOPIC), context(broker, PRODUCE, 9, ALICE))
    assert other.cr_code is not produce.handle.__code__  # type: ignore[attr-defined]
    await other


async def test_an_anonymous_client_is_refused_where_no_acl_allows_it(broker: Broker) -> None:
    answer = await call(
        broker, DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=[GROUP]), ANONYMOUS
    )
    assert answer.groups[0].error_code == ErrorCode.group_authorization_failed


async def test_allow_everyone_if_no_acl_found_opens_resources_without_acls(
    tmp_path: Path,
) -> None:
    broker = await open_broker(tmp_path, **{"allow.everyone.if.no.acl.found": "true"})
    try:
        answer = await call(broker, DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=[GROUP]))
        assert answer.groups[0].error_code == ErrorCode.none
    finally:
        await broker.close()


def test_a_lazy_route_is_loaded_once_at_its_first_lookup() -> None:
    lazy = next(iter(ROUTES.loaders))
    route = ROUTES[lazy]
    assert ROUTES[lazy] is route
    assert dict.__contains__(ROUTES, lazy)  # an ordinary entry from now on

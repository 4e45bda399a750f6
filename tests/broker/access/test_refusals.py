"""What the rules that split a request share (api/access/refusals.py), without a broker: the
handler answers the allowed items, the refused ones' answers follow in the order asked,
and a handler is not asked when nothing is allowed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import pytest

from kshim.api.access.permissions import Permissions
from kshim.api.access.refusals import Listing, item_by_item
from kshim.api.context import RequestContext
from kshim.protocol.errors import ErrorCode
from kshim.protocol.messages.delete_groups import (
    DeletableGroupResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
)

GROUPS = Listing(DeleteGroupsRequest, "groups_names", DeleteGroupsResponse, "results")
REFUSED = ErrorCode.group_authorization_failed
# The checks here decide without asking an authoriser, and hand the context to the handler.
NO_PERMISSIONS = cast("Permissions", None)
NO_CONTEXT = cast("RequestContext", None)


def refuse_b(
    _permissions: Permissions, _request: DeleteGroupsRequest, groups: Sequence[str]
) -> list[ErrorCode | None]:
    return [REFUSED if group.startswith("b") else None for group in groups]


def refused(group: str, error: ErrorCode) -> DeletableGroupResult:
    return DeletableGroupResult(group_id=group, error_code=error)


async def test_the_handler_answers_the_allowed_and_the_refused_follow_in_order() -> None:
    asked: list[list[str]] = []

    async def handle(
        request: DeleteGroupsRequest, _context: RequestContext
    ) -> DeleteGroupsResponse:
        asked.append(request.groups_names)
        results = [
            DeletableGroupResult(group_id=group, error_code=ErrorCode.none)
            for group in request.groups_names
        ]
        return DeleteGroupsResponse(throttle_time_ms=0, results=results)

    check = item_by_item(GROUPS, refuse_b, refused)
    request = DeleteGroupsRequest(groups_names=["a1", "b1", "a2", "b2"])
    response = await check(request, NO_CONTEXT, NO_PERMISSIONS, handle)
    assert asked == [["a1", "a2"]]
    assert request.groups_names == ["a1", "b1", "a2", "b2"]  # narrowed in a copy
    assert [(result.group_id, result.error_code) for result in response.results] == [
        ("a1", ErrorCode.none),
        ("a2", ErrorCode.none),
        ("b1", REFUSED),
        ("b2", REFUSED),
    ]


async def test_with_nothing_allowed_the_handler_is_not_asked() -> None:
    async def handle(
        _request: DeleteGroupsRequest, _context: RequestContext
    ) -> DeleteGroupsResponse:
        raise AssertionError("asked with nothing allowed")

    check = item_by_item(GROUPS, refuse_b, refused)
    response = await check(
        DeleteGroupsRequest(groups_names=["b1"]), NO_CONTEXT, NO_PERMISSIONS, handle
    )
    assert response == DeleteGroupsResponse(
        throttle_time_ms=0, results=[DeletableGroupResult(group_id="b1", error_code=REFUSED)]
    )


def test_a_misnamed_field_fails_when_the_rule_is_made() -> None:
    with pytest.raises(TypeError, match="groups"):
        Listing(DeleteGroupsRequest, "groups", DeleteGroupsResponse, "results")
    with pytest.raises(TypeError, match="topics"):
        Listing(DeleteGroupsRequest, "groups_names", DeleteGroupsResponse, "topics")

"""AlterConfigs (key 33): replace a topic's overrides with the given set (legacy API)."""

from __future__ import annotations

from typing import Any

from kshim.broker.config.changes import change_resource
from kshim.broker.context import RequestContext


async def handle(request: Any, context: RequestContext) -> dict[str, Any]:
    broker = context.broker
    responses = []
    for resource in request.resources:

        async def replace(resource: Any = resource) -> None:
            overrides = {config.name: config.value for config in resource.configs}
            await broker.topics.set_configs(
                resource.resource_name, overrides, request.validate_only
            )

        responses.append(await change_resource(broker, resource, replace))
    return {"throttle_time": 0, "responses": responses}

"""Topics the gateways keep on the cluster for themselves (the delayed delivery's schedule,
the reviews' placeholder): created when missing, by whichever gateway comes first."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from aiokafka.admin import AIOKafkaAdminClient, NewTopic

TOPIC_ALREADY_EXISTS = 36
METADATA_TRIES = 50
METADATA_RETRY_S = 0.1


async def ensure_topic(
    admin: AIOKafkaAdminClient,
    name: str,
    partitions: int,
    replication: int = 0,
    configs: Mapping[str, str] | None = None,
) -> int:
    """Creates ``name`` with ``partitions`` unless it exists (another gateway's creation is
    as good as this one's); returns how many partitions it has. ``replication`` 0: three,
    or every broker of a smaller cluster. Raises RuntimeError when the cluster refuses."""
    brokers = len((await admin.describe_cluster())["brokers"])
    topic = NewTopic(name, partitions, replication or min(3, brokers), topic_configs=configs)
    response = await admin.create_topics([topic])
    for created, code, *message in response.topic_errors:
        if code not in (0, TOPIC_ALREADY_EXISTS):
            raise RuntimeError(f"cannot create {created}: error {code} {message}")
    for _ in range(METADATA_TRIES):  # a new topic's metadata spreads in a moment
        (described,) = await admin.describe_topics([name])
        if described["error_code"] == 0 and described["partitions"]:
            return len(described["partitions"])
        await asyncio.sleep(METADATA_RETRY_S)
    raise RuntimeError(f"{name} has no partitions")

"""Conformance cases for the group coordinator and the transaction coordinator APIs.

Groups are set up with JoinGroup v5 (two steps) and SyncGroup v3 at fixed versions; a
member joined through raw requests has client id ``kshim-compat`` and host ``/127.0.0.1``
(Kafka prints the address with a leading slash, Java's InetAddress.toString).
"""

from __future__ import annotations

import datetime
from typing import Any

from compat_tests.conformance_bodies import (
    commit_request,
    join_refusal,
    join_request,
    leave_request,
    offset_fetch_exchange,
    sync_request,
)
from compat_tests.conformance_probe import (
    ASSIGNMENT,
    INT32_MIN,
    JOIN_V,
    MEMBER_ID_REQUIRED,
    NODE_ID,
    PROTOCOL,
    SUBSCRIPTION,
    Exchange,
    Probe,
)
from kshim.protocol.apis import ADVERTISED

CLIENT_HOST = "/127.0.0.1"
COMMITTED = 3
TRANSACTION_TIMEOUT_MS = 60_000
IDEMPOTENT_TIMEOUT_MS = 2**31 - 1
RECORDS = 3
NOW_TOLERANCE = datetime.timedelta(minutes=5)


def offset_commit(probe: Probe, version: int) -> Exchange:
    topic, group = probe.create_topic("commit"), probe.name("commit-group")
    partition = {"partition_index": 0, "error_code": 0}
    expected = {"throttle_time": 0, "topics": [{"name": topic, "partitions": [partition]}]}
    request = commit_request(group, topic, -1, "", COMMITTED, "m")
    return Exchange(request, lambda _: expected)


def offset_fetch(probe: Probe, version: int) -> Exchange:
    topic, group = probe.create_topic("fetch-offsets"), probe.name("fetch-offsets-group")
    probe.commit(group, topic, COMMITTED, "m")
    return offset_fetch_exchange(group, topic, COMMITTED, "m")


def find_coordinator(probe: Probe, version: int) -> Exchange:
    group = probe.name("coordinator")
    request = {"key": group, "key_type": 0, "coordinator_keys": [group]}
    where = {"node_id": NODE_ID, "host": probe.host, "port": probe.port}
    # v1-3: Kafka's Errors.NONE.message(), "NONE"; v4+: left unset, which is "".
    expected = {
        "throttle_time": 0,
        "error_code": 0,
        "error_message": "NONE",
        **where,
        "coordinators": [{"key": group, **where, "error_code": 0, "error_message": ""}],
    }
    return Exchange(request, lambda _: expected)


def join_group(probe: Probe, version: int) -> Exchange:
    """v0-v3 join at once; v4+ first answer MEMBER_ID_REQUIRED with the id to use (KIP-394),
    checked here in full, and the exchange is the second join."""
    group = probe.name("join")
    member_id = ""
    if version >= 4:
        first = probe.call(11, version, join_request(group, ""))
        member_id = first.member_id
        assert member_id.startswith(probe.client_id + "-"), member_id
        refusal = join_refusal(MEMBER_ID_REQUIRED, member_id, version)
        assert first == probe_expected(11, version, refusal)

    def expect(actual: Any) -> dict[str, Any]:
        joined = member_id or actual.member_id
        assert joined.startswith(probe.client_id + "-"), joined
        return {
            "throttle_time": 0,
            "error_code": 0,
            "generation_id": 1,
            "protocol_type": "consumer",
            "protocol_name": PROTOCOL,
            "leader": joined,
            "skip_assignment": False,
            "member_id": joined,
            "members": [{"member_id": joined, "group_instance_id": None, "metadata": SUBSCRIPTION}],
        }

    return Exchange(join_request(group, member_id), expect)


def probe_expected(api_key: int, version: int, body: dict[str, Any]) -> Any:
    from kshim.protocol import codec

    return codec.build(codec.response_class(api_key, version), body, any_version=True)


def sync_group(probe: Probe, version: int) -> Exchange:
    group = probe.name("sync")
    first = probe.call(11, JOIN_V, join_request(group, ""))
    joined = probe.call(11, JOIN_V, join_request(group, first.member_id))
    assert int(joined.error_code) == 0, joined
    request = sync_request(group, joined.generation_id, joined.member_id)
    expected = {
        "throttle_time": 0,
        "error_code": 0,
        "protocol_type": "consumer",
        "protocol_name": PROTOCOL,
        "assignment": ASSIGNMENT,
    }
    return Exchange(request, lambda _: expected)


def heartbeat(probe: Probe, version: int) -> Exchange:
    group = probe.name("heartbeat")
    member_id, generation = probe.join(group)
    request = {
        "group_id": group,
        "generation_id": generation,
        "member_id": member_id,
        "group_instance_id": None,
    }
    return Exchange(request, lambda _: {"throttle_time": 0, "error_code": 0})


def leave_group(probe: Probe, version: int) -> Exchange:
    group = probe.name("leave")
    member_id, _ = probe.join(group)
    request = leave_request(group, member_id)
    expected = {
        "throttle_time": 0,
        "error_code": 0,
        "members": [{"member_id": member_id, "group_instance_id": None, "error_code": 0}],
    }
    return Exchange(request, lambda _: expected)


def describe_groups(probe: Probe, version: int) -> Exchange:
    group = probe.name("describe")
    member_id, _ = probe.join(group)
    request = {"groups": [group], "include_authorized_operations": False}
    member = {
        "member_id": member_id,
        "group_instance_id": None,
        "client_id": probe.client_id,
        "client_host": CLIENT_HOST,
        "member_metadata": SUBSCRIPTION,
        "member_assignment": ASSIGNMENT,
    }
    described = {
        "error_code": 0,
        "group_id": group,
        "group_state": "Stable",
        "protocol_type": "consumer",
        "protocol_data": PROTOCOL,
        "members": [member],
        "authorized_operations": INT32_MIN,
    }
    return Exchange(request, lambda _: {"throttle_time": 0, "groups": [described]})


def list_groups(probe: Probe, version: int) -> Exchange:
    """Other scenarios' groups are listed too: ours must be there exactly, once."""
    group = probe.name("list")
    probe.join(group)
    ours = {
        "group_id": group,
        "protocol_type": "consumer",
        "group_state": "Stable",
        "group_type": "classic",
    }

    def expect(actual: Any) -> dict[str, Any]:
        others = [
            {
                "group_id": listed.group_id,
                "protocol_type": listed.protocol_type,
                "group_state": getattr(listed, "group_state", ""),
                "group_type": getattr(listed, "group_type", ""),
            }
            for listed in actual.groups
            if listed.group_id != group
        ]
        position = [listed.group_id for listed in actual.groups].index(group)
        groups = [*others[:position], ours, *others[position:]]
        return {"throttle_time": 0, "error_code": 0, "groups": groups}

    return Exchange({"states_filter": [], "types_filter": []}, expect)


def delete_groups(probe: Probe, version: int) -> Exchange:
    topic, group = probe.create_topic("delete-group"), probe.name("delete-group")
    probe.commit(group, topic, COMMITTED)
    expected = {"throttle_time": 0, "results": [{"group_id": group, "error_code": 0}]}
    return Exchange({"groups_names": [group]}, lambda _: expected)


def offset_delete(probe: Probe, version: int) -> Exchange:
    topic, group = probe.create_topic("offset-delete"), probe.name("offset-delete")
    probe.commit(group, topic, COMMITTED)
    request = {
        "group_id": group,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0}]}],
    }
    partition = {"partition_index": 0, "error_code": 0}
    expected = {
        "error_code": 0,
        "throttle_time": 0,
        "topics": [{"name": topic, "partitions": [partition]}],
    }
    return Exchange(request, lambda _: expected)


def init_producer_id(probe: Probe, version: int) -> Exchange:
    """The lowest version initialises an idempotent producer, the highest a transactional one."""
    transactional = version != ADVERTISED[22][0]
    request = {
        "transactional_id": probe.name("init") if transactional else None,
        "transaction_timeout": TRANSACTION_TIMEOUT_MS if transactional else IDEMPOTENT_TIMEOUT_MS,
        "producer_id": -1,
        "producer_epoch": -1,
    }

    def expect(actual: Any) -> dict[str, Any]:
        assert actual.producer_id >= 0, actual
        return {
            "throttle_time": 0,
            "error_code": 0,
            "producer_id": actual.producer_id,
            "producer_epoch": 0,
        }

    return Exchange(request, expect)

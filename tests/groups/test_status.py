"""Consumption status rows, lag, the text table, and the broker's own view."""

from __future__ import annotations

from kshim.broker.broker import Broker
from kshim.broker.groups.consumption_status import (
    PartitionStatus,
    broker_status,
    group_status,
)
from kshim.broker.groups.member import JoinRequest, SyncRequest
from kshim.cli.status_tables import consumption_table
from kshim.storage.interface import TopicPartition
from kshim.storage.meta.committed_offsets import CommittedOffset
from tests.groups.support import assignment, subscription

T0, T1, T2 = (TopicPartition("orders", index) for index in range(3))


def test_rows_cover_committed_and_assigned_partitions() -> None:
    rows = group_status("billing", {T0: 3, T1: 9}, {T0: 5, T1: 7, T2: 4}, [T2, T0], members=2)
    assert rows == [
        PartitionStatus("billing", "orders", 0, 3, 5, 2),
        PartitionStatus("billing", "orders", 1, 9, 7, 2),
        PartitionStatus("billing", "orders", 2, None, 4, 2),
    ]
    assert [row.lag for row in rows] == [2, 0, None]  # never negative; unknown without a commit


def test_lag_is_unknown_when_the_partition_is_gone() -> None:
    (row,) = group_status("g", {T0: 3}, {}, [], members=0)
    assert row.lag is None


def test_table_layout() -> None:
    rows = [
        PartitionStatus("billing", "orders", 0, 3, 5, 1),
        PartitionStatus("billing", "orders", 12, None, 1000, 1),
    ]
    assert consumption_table(rows) == (
        "GROUP    TOPIC   PARTITION  COMMITTED  LOG-END  LAG  MEMBERS\n"
        "billing  orders          0          3        5    2        1\n"
        "billing  orders         12          -     1000    -        1"
    )
    assert consumption_table([]) == "GROUP  TOPIC  PARTITION  COMMITTED  LOG-END  LAG  MEMBERS"


async def test_broker_status_reads_offsets_assignments_and_members(broker: Broker) -> None:
    coordinator = broker.groups
    joined = await coordinator.join(
        JoinRequest(
            "live",
            "",
            None,
            "c",
            "",
            10_000,
            10_000,
            "consumer",
            (("range", subscription("orders")),),
            False,
        )
    )
    await coordinator.sync(
        SyncRequest(
            "live",
            1,
            joined.member_id,
            None,
            None,
            None,
            ((joined.member_id, assignment("orders", [0, 1])),),
        )
    )
    await coordinator.offsets.commit("live", {T0: CommittedOffset(0, -1, "", 0)})
    await coordinator.offsets.commit("idle", {T1: CommittedOffset(0, -1, "", 0)})
    # A full-data view's partition has a log end too; a topic that is gone has none.
    view, gone = TopicPartition("orders.full", 0), TopicPartition("gone", 0)
    await coordinator.offsets.commit("viewer", {view: CommittedOffset(0, -1, "", 0)})
    await coordinator.offsets.commit("viewer", {gone: CommittedOffset(0, -1, "", 0)})

    rows = await broker_status(broker)

    assert [
        (r.group_id, r.topic, r.partition, r.committed, r.log_end, r.members) for r in rows
    ] == [
        ("idle", "orders", 1, 0, 0, 0),
        ("live", "orders", 0, 0, 0, 1),
        ("live", "orders", 1, None, 0, 1),
        ("viewer", "gone", 0, 0, None, 0),
        ("viewer", "orders.full", 0, 0, 0, 0),
    ]
    assert [r.group_id for r in await broker_status(broker, "idle")] == ["idle"]

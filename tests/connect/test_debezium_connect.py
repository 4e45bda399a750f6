"""Kafka Connect 3.9 in distributed mode with Debezium's PostgreSQL connector, against kshim
and, with the same assertions, against Apache Kafka (conftest.py's ``connect_broker``).

One Connect cluster (its config, offset and status topics in the broker, its workers a group
in the broker's coordinator) captures a PostgreSQL database with ``wal_level=logical``
through pgoutput, a publication and a replication slot. The tests run in order on that
cluster:

0. Connect's internal topics as Connect checks them (partitions, cleanup.policy=compact);
1. the snapshot of existing rows (``op: r``), then inserts, updates and deletes (each
   delete followed by a tombstone) in the source's order;
2. kill -9 of the worker, changes while it is down, a restart: it resumes from the offsets
   stored in the broker, without a new snapshot and without losing a change (at least once:
   changes after the last offset flush may come twice);
3. a second worker joins the group and the connectors and tasks are rebalanced over both;
   a config change sent to the second worker's REST API is forwarded to the leader;
4. the cluster restarted with ``exactly.once.source.support=enabled``: the task's producer
   is transactional and commits its offsets in its transactions; a kill -9 in the middle of
   a stream of inserts, and a reader with ``isolation.level=read_committed`` sees every
   insert exactly once.

Skipped with the reason without Java, the Connect jars (kshim.jvm's ``connect`` set:
examples/connect/classpath.py) or PostgreSQL; the Kafka runs without the Kafka jars.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from examples.connect.postgres_connector import postgres_connector_config
from examples.connect.rest import ConnectRest, ConnectRestError, wait_for
from kshim.testing import BrokerProcess
from spark_examples.testing import topic_end_offset
from tests.connect.connect_helpers import (
    ChangeEvent,
    ConnectWorker,
    connect_unavailable_reason,
    first_occurrences,
    operations,
    read_events,
    wait_for_events,
)
from tests.connect.source_changes import CREATE_TABLES

UNAVAILABLE = connect_unavailable_reason()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(UNAVAILABLE is not None, reason=UNAVAILABLE or ""),
    pytest.mark.timeout(300),
]

GROUP_ID = "kshim-connect"
CONNECTOR = "inventory"
PREFIX = "shop"
CUSTOMERS = f"{PREFIX}.public.customers"
ORDERS = f"{PREFIX}.public.orders"
RUNNING_TIMEOUT_S = 120.0
EVENTS_TIMEOUT_S = 90.0

SOURCE_SCHEMA = (
    *CREATE_TABLES,
    "CREATE TABLE products (id integer PRIMARY KEY, title text)",
    "INSERT INTO customers SELECT i, 'customer ' || i, i * 1.25, DATE '2000-01-01' + i,"
    " TIMESTAMP '2020-01-01 10:00:00' + i * INTERVAL '1 hour', i % 2 = 0,"
    " decode(lpad(to_hex(i), 4, '0'), 'hex'), i / 4.0 FROM generate_series(1, 5) AS i",
    "INSERT INTO orders SELECT i, i, i * 10, 'order ' || i FROM generate_series(1, 3) AS i",
)


@dataclass
class ConnectCluster:
    """The module's source database, broker and workers (started in the tests' order)."""

    source_url: str
    broker: BrokerProcess
    work_dir: Path
    workers: list[ConnectWorker] = field(default_factory=list)

    def start_worker(self, name: str, exactly_once: bool = False) -> ConnectWorker:
        worker = ConnectWorker(self.work_dir / name, self.broker.bootstrap, GROUP_ID, exactly_once)
        self.workers.append(worker)
        return worker.start()

    def execute(self, *statements: str) -> None:
        """Runs each statement in a transaction of its own at the source."""
        import psycopg

        with psycopg.connect(self.source_url, autocommit=True) as connection:
            for statement in statements:
                connection.execute(statement)

    def connector_config(self, prefix: str, tables: list[str], name: str) -> dict[str, str]:
        return postgres_connector_config(
            self.source_url, prefix, tables, slot=f"{name}_slot", publication=f"{name}_pub"
        )


def _logs(cluster: ConnectCluster) -> str:
    return "\n".join(worker.log_text()[-4000:] for worker in cluster.workers)


@pytest.fixture(scope="module")
def cluster(
    source_database: str, connect_broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConnectCluster]:
    """Worker 1 running, with the ``inventory`` connector (customers, orders) registered."""
    cluster = ConnectCluster(source_database, connect_broker, tmp_path_factory.mktemp("connect"))
    cluster.execute(*SOURCE_SCHEMA)
    try:
        worker = cluster.start_worker("worker-1")
        config = cluster.connector_config(PREFIX, ["public.customers", "public.orders"], CONNECTOR)
        worker.rest.put_connector(CONNECTOR, config)
        worker.rest.wait_until_running(CONNECTOR, tasks=1, timeout_s=RUNNING_TIMEOUT_S)
        yield cluster
    finally:
        for started in cluster.workers:
            started.stop()


def test_internal_topics_as_connect_checks_them(cluster: ConnectCluster) -> None:
    """Connect creates its topics compacted and, at every start, refuses to run when
    DescribeConfigs does not answer cleanup.policy=compact for them."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": cluster.broker.bootstrap})
    partitions = {"configs": 1, "offsets": 25, "status": 5}  # Connect's defaults
    topics = admin.list_topics(timeout=10).topics
    for kind, count in partitions.items():
        topic = f"{GROUP_ID}-{kind}"
        assert len(topics[topic].partitions) == count, topic
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        configs = admin.describe_configs([resource])[resource].result(timeout=10)
        assert configs["cleanup.policy"].value == "compact", topic


def test_snapshot_then_changes_in_order(cluster: ConnectCluster) -> None:
    bootstrap = cluster.broker.bootstrap
    snapshot = wait_for_events(bootstrap, CUSTOMERS, lambda e: len(e) >= 5, EVENTS_TIMEOUT_S)
    assert operations(snapshot) == [("r", n) for n in range(1, 6)]
    first = snapshot[0].row
    assert first is not None
    assert (first["name"], first["active"], first["score"]) == ("customer 1", False, 0.25)
    orders = wait_for_events(bootstrap, ORDERS, lambda e: len(e) >= 3, EVENTS_TIMEOUT_S)
    assert operations(orders) == [("r", n) for n in range(1, 4)]

    cluster.execute(
        "INSERT INTO customers (id, name) VALUES (100, 'new')",
        "UPDATE customers SET name = 'renamed' WHERE id = 100",
        "UPDATE customers SET balance = 99.99 WHERE id = 1",
        "DELETE FROM customers WHERE id = 100",
        "DELETE FROM customers WHERE id = 2",
    )
    expected = [
        ("c", 100), ("u", 100), ("u", 1), ("d", 100), ("tombstone", 100), ("d", 2),
        ("tombstone", 2),
    ]  # fmt: skip
    events = wait_for_events(
        bootstrap, CUSTOMERS, lambda e: len(e) >= 5 + len(expected), EVENTS_TIMEOUT_S
    )
    changes = events[5:]
    assert operations(changes) == expected
    assert [_name(event) for event in changes[:2]] == ["new", "renamed"]
    deleted = changes[3].value
    assert deleted is not None and deleted["before"]["id"] == 100 and deleted["after"] is None
    lsns = [event.lsn for event in changes if event.lsn is not None]
    assert lsns == sorted(lsns), "changes out of the source's commit order"


def _name(event: ChangeEvent) -> Any:
    return None if event.row is None else event.row["name"]


def test_killed_worker_resumes_from_stored_offsets(cluster: ConnectCluster) -> None:
    bootstrap = cluster.broker.bootstrap
    worker = cluster.workers[0]
    cluster.execute("INSERT INTO orders VALUES (10, 1, 5, 'before the kill')")
    wait_for_events(bootstrap, ORDERS, lambda e: ("c", 10) in operations(e), EVENTS_TIMEOUT_S)
    customers_before = topic_end_offset(bootstrap, CUSTOMERS)

    worker.kill()
    cluster.execute(
        "INSERT INTO orders VALUES (11, 1, 6, 'while down')",
        "INSERT INTO orders VALUES (12, 2, 7, 'while down')",
        "UPDATE orders SET note = 'updated while down' WHERE id = 10",
        "DELETE FROM orders WHERE id = 11",
    )
    worker.start()
    worker.rest.wait_until_running(CONNECTOR, tasks=1, timeout_s=RUNNING_TIMEOUT_S)

    expected = [
        ("r", 1), ("r", 2), ("r", 3), ("c", 10), ("c", 11), ("c", 12), ("u", 10), ("d", 11),
        ("tombstone", 11),
    ]  # fmt: skip
    events = wait_for_events(
        bootstrap,
        ORDERS,
        lambda e: operations(first_occurrences(e)) == expected,
        EVENTS_TIMEOUT_S,
    )
    assert "r" not in [event.op for event in events[3:]], "the restarted task snapshotted again"
    assert "r" not in [e.op for e in read_events(bootstrap, CUSTOMERS, start=customers_before)]
    replays = len(events) - len(first_occurrences(events))
    print(f"at-least-once restart: {replays} change(s) delivered twice")


def test_second_worker_joins_and_tasks_rebalance(cluster: ConnectCluster) -> None:
    first = cluster.workers[0]
    # A snapshot of no rows stores no offset, and the connector would snapshot again when
    # its config changes below: give it a row.
    cluster.execute("INSERT INTO products VALUES (1, 'before the second worker')")
    registered = subprocess.run(
        [sys.executable, "-m", "examples.connect.postgres_connector",
         "--rest", first.rest.base_url, "--name", "catalog", "--database", cluster.source_url,
         "--tables", "public.products", "--topic-prefix", "catalog"],
        capture_output=True, text=True, timeout=RUNNING_TIMEOUT_S + 30, check=False,
    )  # fmt: skip
    assert registered.returncode == 0, registered.stderr
    assert json.loads(registered.stdout)["tasks"][0]["state"] == "RUNNING"
    catalog = first.rest.request("GET", "/connectors/catalog/config")

    second = cluster.start_worker("worker-2")

    def spread_over_both() -> bool:
        return _workers_in_use(first.rest) == {first.worker_id, second.worker_id}

    wait_for(spread_over_both, RUNNING_TIMEOUT_S, "connectors and tasks on both workers")
    for name in (CONNECTOR, "catalog"):
        first.rest.wait_until_running(name, tasks=1, timeout_s=RUNNING_TIMEOUT_S)

    # A write to a worker that is not the leader is forwarded to the leader (jetty's client).
    second.rest.put_connector("catalog", catalog | {"poll.interval.ms": "200"})
    wait_for(
        lambda: (
            first.rest.request("GET", "/connectors/catalog/config").get("poll.interval.ms") == "200"
        ),
        RUNNING_TIMEOUT_S,
        "the forwarded config change",
    )
    first.rest.wait_until_running("catalog", tasks=1, timeout_s=RUNNING_TIMEOUT_S)
    cluster.execute(
        "INSERT INTO products VALUES (2, 'after the rebalance')",
        "INSERT INTO customers (id, name) VALUES (200, 'after the rebalance')",
    )
    bootstrap = cluster.broker.bootstrap
    wait_for_events(
        bootstrap, "catalog.public.products", lambda e: operations(e) == [("r", 1), ("c", 2)], 60
    )
    wait_for_events(bootstrap, CUSTOMERS, lambda e: ("c", 200) in operations(e), 60)
    second.rest.delete_connector("catalog")
    wait_for(lambda: "catalog" not in first.rest.request("GET", "/connectors"), 60, "deletion")


def _workers_running(rest: ConnectRest, name: str) -> list[str]:
    """The workers of the connector's RUNNING tasks; [] while its status is unknown."""
    try:
        tasks = rest.status(name)["tasks"]
    except (ConnectRestError, OSError):
        return []
    return [task["worker_id"] for task in tasks if task["state"] == "RUNNING"]


def _workers_in_use(rest: ConnectRest) -> set[str]:
    used: set[str] = set()
    for name in rest.request("GET", "/connectors"):
        status = rest.status(name)
        used.add(status["connector"]["worker_id"])
        used.update(task["worker_id"] for task in status["tasks"])
    return used


INSERTS = 300
INSERT_PACE_S = 0.02
# A transaction spans 3 s of changes: long enough to see it open, with records in the log
# that a read_committed reader does not get yet, and kill the worker then.
TRANSACTION_INTERVAL_MS = "3000"


def test_exactly_once_source_support(cluster: ConnectCluster) -> None:
    bootstrap = cluster.broker.bootstrap
    for worker in cluster.workers:
        worker.stop()
    worker = cluster.start_worker("worker-eos", exactly_once=True)
    config = cluster.connector_config(PREFIX, ["public.customers", "public.orders"], CONNECTOR)
    # "required" is refused unless the connector declares exactly-once support (KIP-618).
    eos = {
        "exactly.once.support": "required",
        "transaction.boundary": "interval",
        "transaction.boundary.interval.ms": TRANSACTION_INTERVAL_MS,
    }
    # Created anew rather than reconfigured: a reconfigured task is stopped and started again
    # after a rebalance, while its status still says RUNNING, and a kill would land in the
    # middle of that. Its offsets stay in the offsets topic: it resumes there, no snapshot.
    # The task the new worker took over runs first: an exactly-once task stopped while it
    # starts is waiting for the herder to confirm its generation (before its producer
    # starts), and the herder, stopping it, waits for it: both wait out the worker's
    # task.shutdown.graceful.timeout.ms, and every REST write with them.
    wait_for(
        lambda: _workers_running(worker.rest, CONNECTOR) == [worker.worker_id],
        RUNNING_TIMEOUT_S,
        "the connector's task running on the new worker",
    )
    worker.rest.delete_connector(CONNECTOR)
    wait_for(
        lambda: CONNECTOR not in worker.rest.request("GET", "/connectors"),
        RUNNING_TIMEOUT_S,
        "the connector's deletion",
    )
    worker.rest.put_connector(CONNECTOR, config | eos)
    worker.rest.wait_until_running(CONNECTOR, tasks=1, timeout_s=RUNNING_TIMEOUT_S)
    start = topic_end_offset(bootstrap, ORDERS)

    inserting = threading.Thread(target=_insert_orders, args=(cluster,), daemon=True)
    inserting.start()
    wait_for(
        lambda: _open_transaction_records(bootstrap, start) > 0,
        EVENTS_TIMEOUT_S,
        "an open transaction with records",
    )
    worker.kill()  # the transaction stays open until the restarted producer aborts it
    worker.start()
    inserting.join(60)
    worker.rest.wait_until_running(CONNECTOR, tasks=1, timeout_s=RUNNING_TIMEOUT_S)

    wanted = set(range(1000, 1000 + INSERTS))

    def all_committed(events: list[ChangeEvent]) -> bool:
        return wanted <= {identity for op, identity in operations(events) if op == "c"}

    committed = wait_for_events(
        bootstrap, ORDERS, all_committed, EVENTS_TIMEOUT_S, "read_committed", start
    )
    inserted = [identity for op, identity in operations(committed) if op == "c"]
    assert sorted(inserted) == sorted(wanted), "a change read twice or lost"
    assert inserted == sorted(inserted), "inserts out of the source's order"
    assert "r" not in [event.op for event in committed]
    every = read_events(bootstrap, ORDERS, "read_uncommitted", start)
    aborted = len(every) - len(committed)
    assert aborted > 0, "the killed worker's open transaction left no records"
    print(f"exactly once: {aborted} record(s) of the aborted transaction hidden")
    assert f"transactionalId={GROUP_ID}-{CONNECTOR}-0" in worker.log_text()


def _open_transaction_records(bootstrap: str, start: int) -> int:
    """Records in the log that a read_committed reader does not get (yet). The log is read
    to its end first: records appended between the two reads then cannot count as open."""
    every = read_events(bootstrap, ORDERS, "read_uncommitted", start)
    return len(every) - len(read_events(bootstrap, ORDERS, "read_committed", start))


def _insert_orders(cluster: ConnectCluster) -> None:
    import psycopg

    with psycopg.connect(cluster.source_url, autocommit=True) as connection:
        for identity in range(1000, 1000 + INSERTS):
            connection.execute("INSERT INTO orders VALUES (%s, 1, 1, 'exactly once')", (identity,))
            time.sleep(INSERT_PACE_S)

"""The PostgreSQL source the Connect tests capture: its two tables, random changes to
them, and markers that say when every change before them is in the topics."""

from __future__ import annotations

import datetime
import itertools
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tests.connect.connect_helpers import ChangeEvent, wait_for_events

TABLES = ["customers", "orders"]
# Row 0 of each table carries the markers; rows 1 to 10 of customers are there before the
# capture starts (the snapshot).
# The two tables' definitions, one column of each type the pipeline carries.
CREATE_TABLES = (
    "CREATE TABLE customers (id integer PRIMARY KEY, name text NOT NULL,"
    " balance numeric(12,2), born date, seen timestamp, active boolean, photo bytea,"
    " score double precision)",
    "CREATE TABLE orders (id integer PRIMARY KEY, customer_id integer, amount numeric(12,2),"
    " note text)",
)
SOURCE_SCHEMA = (
    *CREATE_TABLES,
    "INSERT INTO customers (id, name) VALUES (0, 'marker 0')",
    "INSERT INTO orders (id, note) VALUES (0, 'marker 0')",
    "INSERT INTO customers SELECT i, 'customer ' || i, i * 1.25, DATE '2000-01-01' + i,"
    " TIMESTAMP '2020-01-01 10:00:00.123456' + i * INTERVAL '1 hour', i % 2 = 0,"
    " decode(lpad(to_hex(i), 4, '0'), 'hex'), i / 3.0 FROM generate_series(1, 10) AS i",
)
UPSERT_CUSTOMER = (
    "INSERT INTO customers VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO"
    " UPDATE SET name = excluded.name, balance = excluded.balance, born = excluded.born,"
    " seen = excluded.seen, active = excluded.active, photo = excluded.photo,"
    " score = excluded.score"
)
UPSERT_ORDER = (
    "INSERT INTO orders VALUES (%s, %s, %s, %s) ON CONFLICT (id) DO UPDATE SET"
    " customer_id = excluded.customer_id, amount = excluded.amount, note = excluded.note"
)
Statement = tuple[str, tuple[object, ...]]
_markers = itertools.count(1)


@dataclass(frozen=True)
class CapturedSource:
    """A source database whose ``topics`` (one per table of TABLES, in order) a connector
    writes to ``bootstrap``; ``keys`` rows of each table change at random."""

    url: str
    bootstrap: str
    topics: Sequence[str]
    keys: int

    def execute(self, transactions: list[list[Statement]], pace_s: float = 0.0) -> None:
        """Runs each list of statements as one source transaction, ``pace_s`` apart."""
        import psycopg

        with psycopg.connect(self.url) as connection:
            for statements in transactions:
                with connection.transaction():
                    for statement, parameters in statements:
                        connection.execute(statement, parameters or None)
                time.sleep(pace_s)

    def random_changes(self, count: int, seed: int, pace_s: float = 0.0) -> None:
        """About ``count`` inserts, updates and deletes, one to five per transaction."""
        generator = random.Random(seed)
        transactions = []
        while count > 0:
            size = min(count, generator.randint(1, 5))
            transactions.append([self._random_statement(generator) for _ in range(size)])
            count -= size
        self.execute(transactions, pace_s)

    def wait_until_captured(self, timeout_s: float, isolation: str = "read_uncommitted") -> None:
        """Changes row 0 of both tables in one transaction and waits until a reader at
        ``isolation`` sees both: the connector reads the source's log in commit order, so
        every change before is in the topics too."""
        marker = f"marker {next(_markers)}"
        self.execute([[
            ("UPDATE customers SET name = %s WHERE id = 0", (marker,)),
            ("UPDATE orders SET note = %s WHERE id = 0", (marker,)),
        ]])  # fmt: skip
        for topic, column in zip(self.topics, ("name", "note"), strict=True):
            wait_for_events(self.bootstrap, topic, _marked(column, marker), timeout_s, isolation)

    def _random_statement(self, generator: random.Random) -> Statement:
        identity = generator.randint(1, self.keys)
        table = generator.choice(TABLES)
        if generator.random() < 0.25:
            return f"DELETE FROM {table} WHERE id = %s", (identity,)
        if table == "orders":
            amount = f"{generator.randint(-(10**6), 10**6) / 100:.2f}"
            note = None if generator.random() < 0.2 else f"note {generator.random():.5f} é✓"
            return UPSERT_ORDER, (identity, generator.randint(1, self.keys), amount, note)
        return UPSERT_CUSTOMER, (
            identity,
            f"customer {generator.random():.6f}",
            None if generator.random() < 0.2 else f"{generator.randint(-(10**8), 10**8) / 100:.2f}",
            datetime.date(2000, 1, 1) + datetime.timedelta(days=generator.randint(-20000, 20000)),
            f"2024-05-06 07:08:09.{generator.randint(0, 999999):06d}",
            generator.choice([True, False, None]),
            None if generator.random() < 0.3 else generator.randbytes(generator.randint(0, 12)),
            None if generator.random() < 0.2 else generator.uniform(-1e6, 1e6),
        )


def _marked(column: str, marker: str) -> Callable[[list[ChangeEvent]], bool]:
    def marked(events: list[ChangeEvent]) -> bool:
        return any(
            event.row is not None and event.row.get("id") == 0 and event.row.get(column) == marker
            for event in events
        )

    return marked

"""The Debezium PostgreSQL connector's settings, and registering it over Connect's REST API.

    python -m examples.connect.postgres_connector --rest http://127.0.0.1:8083 \\
        --name inventory --database postgresql://me:secret@db-host:5432/shop \\
        --tables public.customers,public.orders --topic-prefix shop [--exactly-once] \\
        [--set KEY=VALUE ...]

The connector reads PostgreSQL's logical replication stream with the built-in ``pgoutput``
plugin (the server needs ``wal_level=logical``, and the user the REPLICATION attribute or
superuser), through a replication slot and a publication of the listed tables that it
creates if absent. It first snapshots the tables' rows (``op: r``), then streams every
committed insert (``c``), update (``u``) and delete (``d``, followed by a tombstone) to one
topic per table, ``<topic prefix>.<schema>.<table>``. Its position (the LSN) is stored in
Connect's offsets topic, so a restarted task resumes there, without a new snapshot.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.parse
from collections.abc import Mapping, Sequence

from examples.connect.rest import ConnectRest, ConnectRestError

POSTGRES_CONNECTOR = "io.debezium.connector.postgresql.PostgresConnector"
RUNNING_TIMEOUT_S = 120.0


def postgres_connector_config(
    database_url: str,
    topic_prefix: str,
    tables: Sequence[str],
    slot: str,
    publication: str,
    exactly_once: bool = False,
    overrides: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The connector's config for the database at ``database_url``
    (``postgresql://user[:password]@host[:port]/dbname``), capturing ``tables``
    (``schema.table``). ``exactly_once`` asks for exactly-once delivery (KIP-618: the worker
    must run with ``exactly.once.source.support=enabled``), one transaction per poll."""
    url = urllib.parse.urlsplit(database_url)
    if url.scheme not in ("postgresql", "postgres") or not url.hostname:
        raise ValueError(f"not a postgresql://user@host/dbname URL: {database_url!r}")
    config = {
        "connector.class": POSTGRES_CONNECTOR,
        "tasks.max": "1",  # the connector reads one replication slot: one task
        "database.hostname": url.hostname,
        "database.port": str(url.port or 5432),
        "database.user": urllib.parse.unquote(url.username or "postgres"),
        "database.dbname": url.path.lstrip("/") or "postgres",
        "topic.prefix": topic_prefix,
        "plugin.name": "pgoutput",
        "slot.name": slot,
        "publication.name": publication,
        "publication.autocreate.mode": "filtered",  # a publication of the listed tables only
        "table.include.list": ",".join(tables),
        "snapshot.mode": "initial",
        "tombstones.on.delete": "true",
    }
    if url.password is not None:
        config["database.password"] = urllib.parse.unquote(url.password)
    if exactly_once:
        config["exactly.once.support"] = "required"
        config["transaction.boundary"] = "poll"
    return config | dict(overrides or {})


def _setting(text: str) -> tuple[str, str]:
    key, separator, value = text.partition("=")
    if not separator:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key.strip(), value


def main(argv: Sequence[str] | None = None) -> int:
    """Creates or updates the connector and waits until it runs; 1 when it does not."""
    parser = argparse.ArgumentParser(
        prog="python -m examples.connect.postgres_connector",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("--rest", default="http://127.0.0.1:8083", help="a worker's REST URL")
    parser.add_argument("--name", required=True, help="the connector's name")
    parser.add_argument("--database", required=True, help="postgresql://user@host:port/db")
    parser.add_argument("--tables", required=True, help="schema.table,... to capture")
    parser.add_argument("--topic-prefix", required=True, help="topics are PREFIX.schema.table")
    parser.add_argument("--slot", help="replication slot (default: NAME_slot)")
    parser.add_argument("--publication", help="publication (default: NAME_publication)")
    parser.add_argument("--exactly-once", action="store_true", help="exactly.once.support")
    parser.add_argument("--set", type=_setting, action="append", default=[], metavar="K=V")
    arguments = parser.parse_args(argv)
    name = arguments.name
    config = postgres_connector_config(
        arguments.database,
        arguments.topic_prefix,
        [table.strip() for table in arguments.tables.split(",") if table.strip()],
        slot=arguments.slot or f"{name}_slot",
        publication=arguments.publication or f"{name}_publication",
        exactly_once=arguments.exactly_once,
        overrides=dict(arguments.set),
    )
    rest = ConnectRest(arguments.rest)
    try:
        rest.put_connector(name, config)
        status = rest.wait_until_running(name, tasks=1, timeout_s=RUNNING_TIMEOUT_S)
    except (ConnectRestError, OSError, TimeoutError) as error:
        print(f"postgres_connector: error: {error}", file=sys.stderr)
        return 1
    print(json.dumps(status))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``kshim acls`` as a user runs it: the real command (``python -m kshim acls``) in a child
process, its lines, tables, ``--json`` objects and one-line errors, against a real kshim
broker served from a thread of this process (with an authoriser, and ``User:ANONYMOUS``,
the principal of a PLAINTEXT connection, as its super user).

Every wait is bounded; only the processes and threads started here are stopped.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kshim.broker.broker import Broker
from kshim.broker.config.broker_config import BrokerConfig
from kshim.protocol.acls import Operation, ResourceType
from kshim.server.listener import KafkaServer
from kshim.testing import free_port

COMMAND = [sys.executable, "-m", "kshim", "acls"]
COMMAND_TIMEOUT_S = 60.0
START_TIMEOUT_S = 30.0
PROGRAM = "kshim acls"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
TABLE_HEADER = "RESOURCE-TYPE  RESOURCE  PATTERN  PRINCIPAL   HOST  OPERATION  PERMISSION"


class ThreadBroker:
    """A kshim broker and its listener on an event loop of their own, in a thread, so that
    a test can both run the command and look at the broker's objects."""

    def __init__(self, data_dir: Path, settings: dict[str, str]) -> None:
        values = {
            "log.dirs": str(data_dir),
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "kshim.full.view.process": "false",
            **settings,
        }
        self._config = BrokerConfig.load([values])
        self._ready = threading.Event()
        self._thread = threading.Thread(target=asyncio.run, args=(self._serve(),))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self.broker: Broker | None = None
        self.bootstrap = ""

    def start(self) -> ThreadBroker:
        self._thread.start()
        assert self._ready.wait(START_TIMEOUT_S), "the broker did not start"
        assert self.bootstrap, "the broker failed to start"
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(START_TIMEOUT_S)
        assert not self._thread.is_alive()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        try:
            self.broker = Broker(self._config)
            server = KafkaServer(self.broker)
            host, port = await server.start()
            self.bootstrap = f"{host}:{port}"
        finally:
            self._ready.set()
        await self._stop.wait()
        await server.stop()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadBroker]:
    """One broker for this module; each test uses resources of its own names."""
    settings = {"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:ANONYMOUS"}
    started = ThreadBroker(tmp_path_factory.mktemp("acls") / "data", settings).start()
    yield started
    started.stop()


def kshim_acls(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*COMMAND, *arguments],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )


def succeeded(*arguments: str) -> list[str]:
    """The lines the command printed; fails the test unless it exited 0 and said nothing
    on stderr."""
    result = kshim_acls(*arguments)
    assert (result.returncode, result.stderr) == (0, ""), result
    return result.stdout.splitlines()


def json_lines(*arguments: str) -> list[Any]:
    return [json.loads(line) for line in succeeded(*arguments, "--json")]


def assert_one_error_line(result: subprocess.CompletedProcess[str], status: int, line: str) -> None:
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stderr.splitlines() == [line]
    assert result.stdout == ""
    assert result.returncode == status


def acl_json(
    name: str,
    operation: str = "READ",
    principal: str = "User:alice",
    resource_type: str = "TOPIC",
    pattern_type: str = "LITERAL",
    permission: str = "ALLOW",
    host: str = "*",
) -> dict[str, str]:
    return {
        "resource_type": resource_type,
        "resource_name": name,
        "pattern_type": pattern_type,
        "principal": principal,
        "host": host,
        "operation": operation,
        "permission": permission,
    }


def test_add_then_list_as_a_table_and_as_json(broker: ThreadBroker) -> None:
    bootstrap = ("--bootstrap", broker.bootstrap)
    added = succeeded(
        "add", *bootstrap, "--allow-principal", "User:alice", "--operation", "Read", "Write",
        "--topic", "orders",
    )  # fmt: skip
    assert added == [
        "added ALLOW User:alice READ on TOPIC orders (LITERAL) from *",
        "added ALLOW User:alice WRITE on TOPIC orders (LITERAL) from *",
    ]
    assert succeeded("list", *bootstrap, "--topic", "orders") == [
        TABLE_HEADER,
        "TOPIC          orders    LITERAL  User:alice  *     READ       ALLOW",
        "TOPIC          orders    LITERAL  User:alice  *     WRITE      ALLOW",
    ]
    assert json_lines("list", *bootstrap, "--topic", "orders") == [
        acl_json("orders"),
        acl_json("orders", "WRITE"),
    ]
    # The broker decides with what the command stored.
    assert broker.broker is not None
    acls = broker.broker.acls
    assert acls.authorize("User:alice", "10.0.0.9", Operation.WRITE, ResourceType.TOPIC, "orders")


def test_prefixed_patterns_deny_entries_and_match_listing(broker: ThreadBroker) -> None:
    bootstrap = ("--bootstrap", broker.bootstrap)
    succeeded(
        "add", *bootstrap, "--allow-principal", "User:*", "--operation", "describe",
        "--topic", "logs-", "--resource-pattern-type", "prefixed", "--json",
    )  # fmt: skip
    succeeded(
        "add", *bootstrap, "--deny-principal", "User:mallory", "--deny-host", "10.9.9.9",
        "--operation", "All", "--topic", "logs-secret",
    )  # fmt: skip
    matching = json_lines(
        "list", *bootstrap, "--topic", "logs-secret", "--resource-pattern-type", "match"
    )
    assert matching == [
        acl_json("logs-", "DESCRIBE", "User:*", pattern_type="PREFIXED"),
        acl_json("logs-secret", "ALL", "User:mallory", permission="DENY", host="10.9.9.9"),
    ]
    only_mallory = json_lines("list", *bootstrap, "--principal", "User:mallory")
    assert only_mallory == [matching[1]]


def test_producer_and_consumer_make_kafkas_sets_of_acls(broker: ThreadBroker) -> None:
    produced = json_lines(
        "add", "--bootstrap", broker.bootstrap, "--allow-principal", "User:app", "--producer",
        "--consumer", "--idempotent", "--topic", "jobs", "--group", "workers",
        "--transactional-id", "app-tx",
    )  # fmt: skip
    made = {(row["resource_type"], row["resource_name"], row["operation"]) for row in produced}
    assert made == {
        ("TOPIC", "jobs", "WRITE"),
        ("TOPIC", "jobs", "DESCRIBE"),
        ("TOPIC", "jobs", "CREATE"),
        ("TOPIC", "jobs", "READ"),
        ("GROUP", "workers", "READ"),
        ("TRANSACTIONAL_ID", "app-tx", "WRITE"),
        ("TRANSACTIONAL_ID", "app-tx", "DESCRIBE"),
        ("CLUSTER", "kafka-cluster", "IDEMPOTENT_WRITE"),
    }


def test_remove_named_entries_then_every_acl_of_a_resource_with_force(
    broker: ThreadBroker,
) -> None:
    bootstrap = ("--bootstrap", broker.bootstrap)
    for principal in ("User:a", "User:b"):
        succeeded("add", *bootstrap, "--allow-principal", principal, "--group", "billing")
    removed = succeeded("remove", *bootstrap, "--allow-principal", "User:a", "--group", "billing")
    assert removed == ["removed ALLOW User:a ALL on GROUP billing (LITERAL) from *"]
    assert succeeded("remove", *bootstrap, "--allow-principal", "User:a", "--group", "billing") == [
        "no ACL matched: nothing removed"
    ]

    refused = kshim_acls("remove", *bootstrap, "--group", "billing")
    assert_one_error_line(
        refused,
        2,
        f"{PROGRAM}: error: remove without --allow-principal or --deny-principal removes "
        "every ACL of the resources named; add --force to do that",
    )
    assert json_lines("remove", *bootstrap, "--group", "billing", "--force") == [
        acl_json("billing", "ALL", "User:b", resource_type="GROUP")
    ]
    assert json_lines("list", *bootstrap, "--group", "billing") == []


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("add", "--topic", "t"), "add needs --allow-principal or --deny-principal"),
        (
            ("add", "--allow-principal", "User:a", "--operation", "Write", "--group", "g"),
            "ResourceType GROUP only supports operations ALL, READ, DELETE, DESCRIBE, "
            "DESCRIBE_CONFIGS, ALTER_CONFIGS",
        ),
        (
            ("add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type",
             "match"),
            "a --resource-pattern-type of MATCH is not valid when adding ACLs",
        ),
        (
            ("add", "--allow-principal", "User:a", "--cluster", "--resource-pattern-type",
             "prefixed"),
            "--cluster takes no --resource-pattern-type prefixed",
        ),
        (
            ("add", "--allow-principal", "User:a"),
            "name at least one resource: --topic, --group, --transactional-id, "
            "--delegation-token, --user-principal or --cluster",
        ),
    ],
)  # fmt: skip
def test_usage_mistakes_are_one_line_before_any_request(
    arguments: tuple[str, ...], message: str
) -> None:
    # No broker listens there: the mistake is said before any connection is tried.
    result = kshim_acls(*arguments, "--bootstrap", f"127.0.0.1:{free_port()}")
    assert_one_error_line(result, 2, f"{PROGRAM}: error: {message}")


def test_a_principal_without_a_type_is_refused_by_the_parser() -> None:
    result = kshim_acls("add", "--allow-principal", "alice", "--topic", "t")
    assert result.returncode == 2
    assert "is not principalType:name" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_broker_without_an_authoriser_says_security_disabled(tmp_path: Path) -> None:
    plain = ThreadBroker(tmp_path / "data", {}).start()
    try:
        result = kshim_acls("list", "--bootstrap", plain.bootstrap)
    finally:
        plain.stop()
    assert_one_error_line(
        result,
        1,
        f"{PROGRAM}: error: cannot list ACLs: SECURITY_DISABLED "
        "(No Authorizer is configured on the broker)",
    )


def test_an_unreachable_broker_is_one_error_line() -> None:
    bootstrap = f"127.0.0.1:{free_port()}"
    result = kshim_acls("list", "--bootstrap", bootstrap)
    assert_one_error_line(
        result, 1, f"{PROGRAM}: error: cannot reach {bootstrap}: connection refused"
    )

"""DescribeUserScramCredentials and AlterUserScramCredentials as functions of (request,
broker): real handlers over a broker on the in-memory log store, requests decoded from the
bytes Kafka's admin client would send and answers encoded as the connection would."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kio.serial import entity_reader

from kshim.api.context import RequestContext
from kshim.api.security import alter_user_scram_credentials, describe_user_scram_credentials
from kshim.broker.broker import Broker
from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.security.scram_credential import new_salt, salted_password
from kshim.client.frames import encode_body
from kshim.protocol import codec
from kshim.protocol.errors import ErrorCode
from kshim.protocol.headers import RequestHeader
from kshim.protocol.messages import serial
from kshim.protocol.messages.alter_user_scram_credentials import AlterUserScramCredentialsRequest
from kshim.protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
)
from kshim.storage.log.memory_log import MemoryLogStore

DESCRIBE_KEY, ALTER_KEY = 50, 51
VERSION = 0
NOW_MS = 1_700_000_000_000


def clock() -> int:
    return NOW_MS


async def started_broker(directory: Path) -> Broker:
    values = {"log.dirs": str(directory), "kshim.full.view.process": "false"}
    config = BrokerConfig.load([values])
    broker = Broker(config, clock=clock, logs=MemoryLogStore(clock))
    await broker.start()
    return broker


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    started = await started_broker(tmp_path)
    yield started
    await started.close()


def context(broker: Broker, api_key: int) -> RequestContext:
    return RequestContext(RequestHeader(api_key, VERSION, 7, "adminclient-1"), broker)


async def describe(broker: Broker, fields: dict[str, Any]) -> Any:
    """kio's reading of the handler's encoded answer to the request of ``fields``."""
    request = serial.decode_request(
        DescribeUserScramCredentialsRequest,
        DESCRIBE_KEY,
        VERSION,
        encode_body(DESCRIBE_KEY, VERSION, fields),
        0,
    )
    answer = await describe_user_scram_credentials.handle(request, context(broker, DESCRIBE_KEY))
    return encoded_and_read(DESCRIBE_KEY, answer)


async def alter(broker: Broker, fields: dict[str, Any]) -> Any:
    request = serial.decode_request(
        AlterUserScramCredentialsRequest,
        ALTER_KEY,
        VERSION,
        encode_body(ALTER_KEY, VERSION, fields),
        0,
    )
    answer = await alter_user_scram_credentials.handle(request, context(broker, ALTER_KEY))
    return encoded_and_read(ALTER_KEY, answer)


def encoded_and_read(api_key: int, answer: object) -> Any:
    body = serial.encode_response(api_key, VERSION, answer)
    response, size = entity_reader(codec.response_class(api_key, VERSION))(memoryview(body), 0)
    assert size == len(body)
    return response


def upsertion(name: str, mechanism: int, iterations: int, password: str) -> dict[str, Any]:
    """As Kafka's admin client makes one: the password never leaves it."""
    salt = new_salt()
    mechanism_name = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}[mechanism]
    return {
        "name": name,
        "mechanism": mechanism,
        "iterations": iterations,
        "salt": salt,
        "salted_password": salted_password(mechanism_name, password, salt, iterations),
    }


def results(response: Any) -> list[tuple[str, ErrorCode, str | None]]:
    return [(r.user, r.error_code, r.error_message) for r in response.results]


async def test_alter_then_describe(broker: Broker) -> None:
    response = await alter(
        broker,
        {
            "deletions": [],
            "upsertions": [
                upsertion("alice", 1, 4096, "alice-secret"),
                upsertion("bob", 2, 8192, "bob-secret"),
            ],
        },
    )
    assert results(response) == [("alice", ErrorCode.none, None), ("bob", ErrorCode.none, None)]
    everyone = await describe(broker, {"users": None})
    # Messages Kafka's ScramImage.describe leaves unset are sent as "".
    assert (everyone.error_code, everyone.error_message) == (ErrorCode.none, "")
    assert results(everyone) == [("alice", ErrorCode.none, ""), ("bob", ErrorCode.none, "")]
    listed = {
        r.user: [(int(i.mechanism), int(i.iterations)) for i in r.credential_infos]
        for r in everyone.results
    }
    assert listed == {"alice": [(1, 4096)], "bob": [(2, 8192)]}
    assert [r.user for r in (await describe(broker, {"users": []})).results] == ["alice", "bob"]
    assert broker.credentials.check_plain("SASL_SSL", "bob", "bob-secret")


async def test_errors_are_per_user(broker: Broker) -> None:
    response = await alter(
        broker,
        {
            "deletions": [{"name": "ghost", "mechanism": 1}],
            "upsertions": [
                upsertion("alice", 1, 4096, "a"),
                upsertion("carol", 1, 100_000, "c"),
                {**upsertion("dave", 1, 4096, "d"), "mechanism": 5},
            ],
        },
    )
    assert results(response) == [
        (
            "ghost",
            ErrorCode.resource_not_found,
            "Attempt to delete a user credential that does not exist",
        ),
        ("alice", ErrorCode.none, None),
        ("carol", ErrorCode.unacceptable_credential, "Too many iterations"),
        ("dave", ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
    ]
    answer = await describe(broker, {"users": [{"name": "alice"}, {"name": "carol"}]})
    assert [(r.user, r.error_code) for r in answer.results] == [
        ("alice", ErrorCode.none),
        ("carol", ErrorCode.resource_not_found),
    ]


async def test_a_deletion_is_kept_across_a_restart(tmp_path: Path) -> None:
    broker = await started_broker(tmp_path)
    await alter(broker, {"deletions": [], "upsertions": [upsertion("alice", 2, 4096, "pw")]})
    await alter(broker, {"deletions": [], "upsertions": [upsertion("bob", 2, 4096, "pw")]})
    await alter(broker, {"deletions": [{"name": "bob", "mechanism": 2}], "upsertions": []})
    await broker.close()
    broker = await started_broker(tmp_path)
    try:
        answer = await describe(broker, {"users": None})
        assert [r.user for r in answer.results] == ["alice"]
    finally:
        await broker.close()

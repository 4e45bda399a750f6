"""Conformance cases for the SASL, ACL and SCRAM credential APIs, against the probe's broker:
one PLAINTEXT listener and no authoriser, as a Kafka broker configured without security."""

from __future__ import annotations

import datetime
import hashlib
import os
import time

from compat_tests.conformance_probe import Exchange, Probe

ILLEGAL_SASL_STATE, SECURITY_DISABLED, RESOURCE_NOT_FOUND = 34, 54, 91
# Kafka's AclApis words the refusal differently for DescribeAcls than for Create/DeleteAcls.
NO_AUTHORIZER = "No Authorizer is configured."
NO_AUTHORIZER_TO_DESCRIBE = "No Authorizer is configured on the broker"
TOPIC, LITERAL, READ, ALLOW, ANY = 2, 3, 3, 3, 1
SCRAM_SHA_256 = 1
ITERATIONS = 4096
DESCRIBED_WITHIN_S = 10.0


def sasl_handshake(probe: Probe, version: int) -> Exchange:
    # A listener without SASL: Kafka's KafkaApis answers ILLEGAL_SASL_STATE, no mechanisms.
    return Exchange(
        {"mechanism": "PLAIN"}, lambda _: {"error_code": ILLEGAL_SASL_STATE, "mechanisms": []}
    )


def sasl_authenticate(probe: Probe, version: int) -> Exchange:
    expected = {
        "error_code": ILLEGAL_SASL_STATE,
        "error_message": "SaslAuthenticate request received after successful authentication",
        "auth_bytes": b"",
        "session_lifetime": datetime.timedelta(0),
    }
    return Exchange({"auth_bytes": b"\x00user\x00password"}, lambda _: expected)


def describe_acls(probe: Probe, version: int) -> Exchange:
    request = {
        "resource_type_filter": TOPIC,
        "resource_name_filter": probe.name("acl-topic"),
        "pattern_type_filter": LITERAL,
        "principal_filter": None,
        "host_filter": None,
        "operation": ANY,
        "permission_type": ANY,
    }
    expected = {
        "throttle_time": datetime.timedelta(0),
        "error_code": SECURITY_DISABLED,
        "error_message": NO_AUTHORIZER_TO_DESCRIBE,
        "resources": [],
    }
    return Exchange(request, lambda _: expected)


def create_acls(probe: Probe, version: int) -> Exchange:
    creation = {
        "resource_type": TOPIC,
        "resource_name": probe.name("acl-topic"),
        "resource_pattern_type": LITERAL,
        "principal": "User:alice",
        "host": "*",
        "operation": READ,
        "permission_type": ALLOW,
    }
    result = {"error_code": SECURITY_DISABLED, "error_message": NO_AUTHORIZER}
    return Exchange(
        {"creations": [creation]},
        lambda _: {"throttle_time": datetime.timedelta(0), "results": [result]},
    )


def delete_acls(probe: Probe, version: int) -> Exchange:
    acl_filter = {
        "resource_type_filter": TOPIC,
        "resource_name_filter": probe.name("acl-topic"),
        "pattern_type_filter": LITERAL,
        "principal_filter": None,
        "host_filter": None,
        "operation": ANY,
        "permission_type": ANY,
    }
    result = {"error_code": SECURITY_DISABLED, "error_message": NO_AUTHORIZER, "matching_acls": []}
    return Exchange(
        {"filters": [acl_filter]},
        lambda _: {"throttle_time": datetime.timedelta(0), "filter_results": [result]},
    )


def describe_user_scram_credentials(probe: Probe, version: int) -> Exchange:
    """A user with a SCRAM-SHA-256 credential (set up with AlterUserScramCredentials v0)
    and one without: described, and not found."""
    user, nobody = probe.name("user"), probe.name("nobody")
    [created] = probe.call(51, 0, {"deletions": [], "upsertions": [upsertion(user)]}).results
    assert int(created.error_code) == 0, created
    _wait_until_described(probe, user)
    described = {
        "user": user,
        "error_code": 0,
        "error_message": "",
        "credential_infos": [{"mechanism": SCRAM_SHA_256, "iterations": ITERATIONS}],
    }
    missing = {
        "user": nobody,
        "error_code": RESOURCE_NOT_FOUND,
        "error_message": f"Attempt to describe a user credential that does not exist: {nobody}",
        "credential_infos": [],
    }
    expected = {
        "throttle_time": datetime.timedelta(0),
        "error_code": 0,
        "error_message": "",
        "results": [described, missing],
    }
    return Exchange({"users": [{"name": user}, {"name": nobody}]}, lambda _: expected)


def _wait_until_described(probe: Probe, user: str) -> None:
    """Kafka answers AlterUserScramCredentials once the change is in its metadata log, and
    DescribeUserScramCredentials from the broker's credential cache, which applies that log
    a moment later (KRaft, KIP-554): the comparison waits until the user is described."""
    deadline = time.monotonic() + DESCRIBED_WITHIN_S
    while True:
        answer = probe.call(50, 0, {"users": [{"name": user}]})
        if [int(result.error_code) for result in answer.results] == [0]:
            return
        assert time.monotonic() < deadline, f"{user} not described after {DESCRIBED_WITHIN_S} s"
        time.sleep(0.05)


def upsertion(user: str) -> dict[str, object]:
    """A SCRAM-SHA-256 credential for ``user``, salted as Kafka's admin client salts it."""
    salt = os.urandom(16)
    return {
        "name": user,
        "mechanism": SCRAM_SHA_256,
        "iterations": ITERATIONS,
        "salt": salt,
        "salted_password": hashlib.pbkdf2_hmac("sha256", b"password", salt, ITERATIONS),
    }


def alter_user_scram_credentials(probe: Probe, version: int) -> Exchange:
    """A new user's SCRAM-SHA-256 credential."""
    user = probe.name("user")
    result = {"user": user, "error_code": 0, "error_message": None}
    return Exchange(
        {"deletions": [], "upsertions": [upsertion(user)]},
        lambda _: {"throttle_time": datetime.timedelta(0), "results": [result]},
    )

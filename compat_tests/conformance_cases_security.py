"""Conformance cases for the SASL, ACL and SCRAM credential APIs, against the probe's broker:
one PLAINTEXT listener and no authoriser, as a Kafka broker configured without security."""

from __future__ import annotations

import datetime
import hashlib
import os

from compat_tests.conformance_probe import Exchange, Probe

ILLEGAL_SASL_STATE, SECURITY_DISABLED, RESOURCE_NOT_FOUND = 34, 54, 91
NO_AUTHORIZER = "No Authorizer is configured."
TOPIC, LITERAL, READ, ALLOW, ANY = 2, 3, 3, 3, 1
SCRAM_SHA_256 = 1


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
        "error_message": NO_AUTHORIZER,
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
    user = probe.name("nobody")
    result = {
        "user": user,
        "error_code": RESOURCE_NOT_FOUND,
        "error_message": f"Attempt to describe a user credential that does not exist: {user}",
        "credential_infos": [],
    }
    expected = {
        "throttle_time": datetime.timedelta(0),
        "error_code": 0,
        "error_message": None,
        "results": [result],
    }
    return Exchange({"users": [{"name": user}]}, lambda _: expected)


def alter_user_scram_credentials(probe: Probe, version: int) -> Exchange:
    """A new user's SCRAM-SHA-256 credential, salted as Kafka's admin client salts it."""
    user, salt = probe.name("user"), os.urandom(16)
    salted = hashlib.pbkdf2_hmac("sha256", b"password", salt, 4096)
    upsertion = {
        "name": user,
        "mechanism": SCRAM_SHA_256,
        "iterations": 4096,
        "salt": salt,
        "salted_password": salted,
    }
    result = {"user": user, "error_code": 0, "error_message": None}
    return Exchange(
        {"deletions": [], "upsertions": [upsertion]},
        lambda _: {"throttle_time": datetime.timedelta(0), "results": [result]},
    )

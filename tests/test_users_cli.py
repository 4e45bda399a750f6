"""``kshim users`` as a user runs it: the real command (``python -m kshim users``) in a child
process against a real ``kshim serve`` with a PLAINTEXT and a SASL_PLAINTEXT listener, its
tables, ``--json`` lines and one-line errors; a credential it sets is proven by logging in
with it (librdkafka's SCRAM client, and the command's own over SASL). What the command
sends is read off a scripted Kafka-protocol peer (tests/scripted_broker.py): a salt and a
salted password, never the password. ``add --data-dir`` writes into a stopped broker's
directory and refuses a running one's.

Every wait is bounded; only processes started here are signalled.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from kshim.testing import START_TIMEOUT_S, failure_lines, free_port, stop_process, wait_for_port
from tests.scripted_broker import ScriptedBroker

pytestmark = pytest.mark.timeout(180)

COMMAND = [sys.executable, "-m", "kshim", "users"]
COMMAND_TIMEOUT_S = 60.0
CLIENT_TIMEOUT_S = 20.0
PROGRAM = "kshim users"
SHA_256, SHA_512 = "SCRAM-SHA-256", "SCRAM-SHA-512"


@dataclass
class SaslBroker:
    """A ``kshim serve`` child with a PLAINTEXT listener (``bootstrap``) for the admin
    commands and a SASL_PLAINTEXT one (``sasl_bootstrap``) for logging in."""

    data_dir: Path
    port: int = field(default_factory=free_port)
    sasl_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir.with_suffix(".log")

    def start(self) -> SaslBroker:
        listeners = f"PLAINTEXT://{self.bootstrap},SASL_PLAINTEXT://{self.sasl_bootstrap}"
        command = [sys.executable, "-m", "kshim", "serve", "--data-dir", str(self.data_dir)]
        command += ["--set", f"listeners={listeners}", "--set", "kshim.metrics.listen="]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            for port in (self.port, self.sasl_port):
                wait_for_port("127.0.0.1", port, START_TIMEOUT_S)
        except TimeoutError:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        stop_process(self.process)
        self.process = None

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslBroker]:
    """One broker for this module; each test uses users of its own names."""
    started = SaslBroker(tmp_path_factory.mktemp("users") / "data").start()
    yield started
    started.stop()
    assert failure_lines(started.log_text()) == []


def kshim_users(*arguments: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*COMMAND, *arguments],
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )


def succeeded(*arguments: str, stdin: str | None = None) -> list[str]:
    """The lines the command printed; fails the test unless it exited 0 and said nothing
    on stderr."""
    result = kshim_users(*arguments, stdin=stdin)
    assert (result.returncode, result.stderr) == (0, ""), result
    return result.stdout.splitlines()


def error_line(status: int, *arguments: str, stdin: str | None = None) -> str:
    """The one stderr line of a command that must fail with ``status``."""
    result = kshim_users(*arguments, stdin=stdin)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == status, result
    [line] = result.stderr.splitlines()
    return line


def add(broker: SaslBroker, user: str, mechanism: str, password: str, *more: str) -> list[str]:
    arguments = ("add", user, "--mechanism", mechanism, "--password-stdin")
    return succeeded(*arguments, "--bootstrap", broker.bootstrap, *more, stdin=password + "\n")


def listed(bootstrap: str, *names: str, more: tuple[str, ...] = ()) -> list[Any]:
    lines = succeeded("list", *names, "--bootstrap", bootstrap, "--json", *more)
    return [json.loads(line) for line in lines]


def sasl_properties(tmp_path: Path, mechanism: str, user: str, password: str) -> str:
    path = tmp_path / f"{user}-{mechanism}.properties"
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        f"sasl.mechanism={mechanism}\n"
        f"sasl.username={user}\nsasl.password={password}\n",
        encoding="utf-8",
    )
    return str(path)


def test_add_list_and_remove(broker: SaslBroker, tmp_path: Path) -> None:
    password_file = tmp_path / "password"
    password_file.write_text("alice-secret\n", encoding="utf-8")
    added = succeeded(
        "add", "alice", "--mechanism", SHA_256, "--password-file", str(password_file),
        "--bootstrap", broker.bootstrap,
    )  # fmt: skip
    assert added == [f"set the {SHA_256} credential of alice (4096 iterations)"]
    added = add(broker, "alice", SHA_512, "alice-512", "--iterations", "8192", "--json")
    assert [json.loads(line) for line in added] == [
        {"user": "alice", "mechanism": SHA_512, "iterations": 8192}
    ]
    assert listed(broker.bootstrap, "alice") == [
        {"user": "alice", "mechanism": SHA_256, "iterations": 4096},
        {"user": "alice", "mechanism": SHA_512, "iterations": 8192},
    ]
    table = succeeded("list", "alice", "--bootstrap", broker.bootstrap)
    assert [line.split() for line in table] == [
        ["USER", "MECHANISM", "ITERATIONS"],
        ["alice", SHA_256, "4096"],
        ["alice", SHA_512, "8192"],
    ]
    removed = succeeded("remove", "alice", "--mechanism", SHA_256, "--bootstrap", broker.bootstrap)
    assert removed == [f"removed the {SHA_256} credential of alice"]
    assert listed(broker.bootstrap, "alice") == [
        {"user": "alice", "mechanism": SHA_512, "iterations": 8192}
    ]
    assert error_line(
        1, "remove", "alice", "--mechanism", SHA_256, "--bootstrap", broker.bootstrap
    ) == (
        f"{PROGRAM}: error: cannot remove the {SHA_256} credential of alice: "
        "RESOURCE_NOT_FOUND (Attempt to delete a user credential that does not exist)"
    )


def test_listing_every_user_and_a_missing_one(broker: SaslBroker) -> None:
    add(broker, "bob", SHA_256, "bob-secret")
    everyone = {(row["user"], row["mechanism"]) for row in listed(broker.bootstrap)}
    assert ("bob", SHA_256) in everyone
    result = kshim_users("list", "bob", "nobody", "--bootstrap", broker.bootstrap, "--json")
    assert result.returncode == 1
    assert [json.loads(line)["user"] for line in result.stdout.splitlines()] == ["bob"]
    assert result.stderr.splitlines() == [f"{PROGRAM}: error: no SCRAM credential for user nobody"]


def test_an_added_user_logs_in_with_scram(broker: SaslBroker, tmp_path: Path) -> None:
    add(broker, "carol", SHA_512, "carol-secret")
    client = AdminClient(
        {
            "bootstrap.servers": broker.sasl_bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": SHA_512,
            "sasl.username": "carol",
            "sasl.password": "carol-secret",
        }
    )
    assert client.list_topics(timeout=CLIENT_TIMEOUT_S).brokers
    # The command itself, over SASL as carol: with her password, then a wrong one.
    good = sasl_properties(tmp_path, SHA_512, "carol", "carol-secret")
    assert listed(broker.sasl_bootstrap, "carol", more=("--command-config", good)) == [
        {"user": "carol", "mechanism": SHA_512, "iterations": 4096}
    ]
    wrong = sasl_properties(tmp_path, SHA_512, "carol", "carol-wrong")
    line = error_line(1, "list", "--bootstrap", broker.sasl_bootstrap, "--command-config", wrong)
    assert line.startswith(f"{PROGRAM}: error: cannot authenticate to {broker.sasl_bootstrap}: ")
    assert line.endswith(
        "Authentication failed during authentication due to invalid credentials with SASL "
        f"mechanism {SHA_512}"
    )


def test_a_new_password_replaces_the_old(broker: SaslBroker, tmp_path: Path) -> None:
    add(broker, "dave", SHA_256, "old-secret")
    add(broker, "dave", SHA_256, "new-secret", "--iterations", "16384")
    new = sasl_properties(tmp_path, SHA_256, "dave", "new-secret")
    assert listed(broker.sasl_bootstrap, "dave", more=("--command-config", new)) == [
        {"user": "dave", "mechanism": SHA_256, "iterations": 16384}
    ]
    old = sasl_properties(tmp_path, SHA_256, "dave", "old-secret")
    line = error_line(1, "list", "--bootstrap", broker.sasl_bootstrap, "--command-config", old)
    assert "cannot authenticate" in line


def test_add_into_a_stopped_brokers_data_directory(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    offline = ("add", "erin", "--mechanism", SHA_256, "--password-stdin", "--data-dir")
    assert succeeded(*offline, str(data_dir), stdin="erin-secret") == [
        f"set the {SHA_256} credential of erin (4096 iterations) in {data_dir}; the broker "
        "reads it at start"
    ]
    broker = SaslBroker(data_dir).start()
    try:
        erin = sasl_properties(tmp_path, SHA_256, "erin", "erin-secret")
        assert listed(broker.sasl_bootstrap, more=("--command-config", erin)) == [
            {"user": "erin", "mechanism": SHA_256, "iterations": 4096}
        ]
        line = error_line(1, *offline, str(data_dir), stdin="other")
        assert line.startswith(f"{PROGRAM}: error: data directory {data_dir} is in use by ")
        assert line.endswith("stop it first, or add the user through it (without --data-dir)")
        # Listing reads the store without its lock: a running broker's too.
        running = succeeded("list", "--data-dir", str(data_dir), "--json")
        assert [json.loads(row) for row in running] == [
            {"user": "erin", "mechanism": SHA_256, "iterations": 4096}
        ]
    finally:
        broker.stop()
    assert failure_lines(broker.log_text()) == []
    assert succeeded("list", "--data-dir", str(data_dir)) == [
        "USER  MECHANISM      ITERATIONS",
        f"erin  {SHA_256}        4096",
    ]
    result = kshim_users("list", "erin", "nobody", "--data-dir", str(data_dir), "--json")
    assert (result.returncode, result.stderr) == (
        1,
        f"{PROGRAM}: error: no SCRAM credential for user nobody\n",
    )
    nothing = tmp_path / "nothing"
    assert error_line(1, "list", "--data-dir", str(nothing)) == (
        f"{PROGRAM}: error: {nothing} is not a kshim data directory (no meta/ in it)"
    )


def test_the_password_never_leaves_the_command() -> None:
    """What the command sends is what Kafka's admin client sends: a fresh salt and
    Hi(password, salt, iterations) (KIP-554)."""

    def altered(request: Any) -> Mapping[str, Any]:
        results = [
            {"user": u.name, "error_code": 0, "error_message": None} for u in request.upsertions
        ]
        return {"throttle_time": 0, "results": results}

    peer = ScriptedBroker({51: altered}).start()
    try:
        arguments = ("add", "frank", "--mechanism", SHA_512, "--iterations", "5000")
        succeeded(*arguments, "--password-stdin", "--bootstrap", peer.bootstrap, stdin="pässword")
    finally:
        peer.stop()
    [request] = peer.requests_of(51)
    assert list(request.deletions) == []
    [upsertion] = request.upsertions
    assert (upsertion.name, upsertion.mechanism, upsertion.iterations) == ("frank", 2, 5000)
    assert len(upsertion.salt) == 32
    expected = hashlib.pbkdf2_hmac("sha512", "pässword".encode(), upsertion.salt, 5000)
    assert upsertion.salted_password == expected
    assert "pässword".encode() not in upsertion.salt + upsertion.salted_password


@pytest.mark.parametrize(
    ("arguments", "stdin", "message"),
    [
        ((), None, "no password: give --password-file or --password-stdin, or run on a"),
        (("--password-stdin",), "\n", "the password is empty"),
        (("--password-file", "/nonexistent/password"), None, "cannot read --password-file"),
        (("--password-stdin", "--password-file", "x"), "pw", "not allowed with argument"),
        (("--password-stdin", "--iterations", "4095"), "pw", "is not an integer from 4096"),
        (("--password-stdin", "--iterations", "lots"), "pw", "is not an integer from 4096"),
    ],
)
def test_usage_mistakes(arguments: tuple[str, ...], stdin: str | None, message: str) -> None:
    line = error_line(2, "add", "grace", "--mechanism", SHA_256, *arguments, stdin=stdin)
    assert line.startswith(f"{PROGRAM}: error: ") and message in line


def test_an_unknown_mechanism_and_an_empty_name_are_usage_mistakes() -> None:
    line = error_line(2, "add", "grace", "--mechanism", "SCRAM-SHA-1", "--password-stdin")
    assert "invalid choice: 'SCRAM-SHA-1'" in line
    line = error_line(2, "add", "", "--mechanism", SHA_256, "--password-stdin", stdin="pw")
    assert line == f"{PROGRAM}: error: the user name is empty"


def test_a_broker_that_cannot_be_reached() -> None:
    bootstrap = f"127.0.0.1:{free_port()}"
    line = error_line(1, "list", "--bootstrap", bootstrap)
    assert line == f"{PROGRAM}: error: cannot reach {bootstrap}: connection refused"

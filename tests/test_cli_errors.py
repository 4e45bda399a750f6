"""The ``kshim`` command as a new user meets it: every mistake ends in one line on stderr
(``kshim: error: ...``, or ``kshim groups: error: ...`` from the groups tool; exit status 2
for bad usage, 1 for a failure at run time), never in a traceback; a broker that starts
says so once and, when stopped, says what it flushed.

Most tests run the real command in a child process (``python -m kshim``) with its own
data directory; every wait is bounded and only processes started here are signalled.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from kshim.broker.config.validators import ConfigError
from kshim.cli.config_sources import load_config
from kshim.cli.main import build_parser
from kshim.client.wire import connect
from kshim.storage.files.data_directory_lock import lock_path
from kshim.testing import free_port
from tests.bad_input_support import PRODUCE, create_topic, make_batch, produce_fields
from tests.cli_runs import clean_environment, run_kshim

COMMAND_TIMEOUT_S = 30.0
START_TIMEOUT_S = 30.0
LISTENING = re.compile(
    r"^kshim listening on (\S+):(\d+) \((PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL)\), "
    r"data in (.+?)(, metrics on http://\S+/metrics)?$"
)
STOPPED = re.compile(
    r"^kshim stopped after \d+\.\d s: \d+ fsyncs, (\d+) bytes made durable \((\d+) through "
    r"the write-ahead log, (\d+) straight to segment files\)$"
)


def assert_one_error_line(result: subprocess.CompletedProcess[str], status: int, line: str) -> None:
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stderr.splitlines() == [line]
    assert result.returncode == status


@dataclass
class Serving:
    """A ``kshim serve`` child that has printed its listening line."""

    process: subprocess.Popen[str]
    port: int
    listening_line: str

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self, signal_number: int = signal.SIGTERM) -> tuple[str, str]:
        """Signals the child and returns the rest of its stdout and all of its stderr."""
        self.process.send_signal(signal_number)
        try:
            return self.process.communicate(timeout=COMMAND_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(COMMAND_TIMEOUT_S)
            raise


def start_serving(
    data_dir: Path, *arguments: str, environment: Mapping[str, str] | None = None
) -> Serving:
    """Starts ``kshim serve`` on any free loopback port; returns once it printed that it
    listens. Raises AssertionError (after killing it) when it exits or stays silent."""
    process = subprocess.Popen(
        [sys.executable, "-m", "kshim", "serve", "--listen", "127.0.0.1:0",
         "--data-dir", str(data_dir), "--set", "kshim.metrics.listen=127.0.0.1:0", *arguments],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=clean_environment(environment),
    )  # fmt: skip
    lines: list[str] = []
    deadline = time.monotonic() + START_TIMEOUT_S
    assert process.stdout is not None
    while time.monotonic() < deadline and process.poll() is None:
        readable, _, _ = select.select([process.stdout], [], [], 0.2)
        if not readable:
            continue
        line = process.stdout.readline().rstrip("\n")
        lines.append(line)
        if match := LISTENING.match(line):
            return Serving(process, int(match[2]), line)
    process.kill()
    _, stderr = process.communicate(timeout=COMMAND_TIMEOUT_S)
    raise AssertionError(f"kshim serve did not start: {lines} {stderr}")


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def serving(data_dir: Path) -> Iterator[Serving]:
    broker = start_serving(data_dir)
    yield broker
    if broker.process.poll() is None:
        broker.stop()


# Failures at run time: exit status 1.


def test_a_port_in_use_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_kshim("serve", "--listen", f"127.0.0.1:{port}", "--data-dir", str(tmp_path))
    assert_one_error_line(
        result, 1, f"kshim: error: cannot listen on 127.0.0.1:{port}: address already in use"
    )


def test_a_data_directory_under_a_regular_file_is_one_line(tmp_path: Path) -> None:
    regular_file = tmp_path / "file"
    regular_file.write_text("")
    data_dir = regular_file / "data"
    result = run_kshim("serve", "--listen", "127.0.0.1:0", "--data-dir", str(data_dir))
    assert_one_error_line(
        result, 1, f"kshim: error: cannot use data directory {data_dir}: not a directory"
    )


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="no /proc filesystem here")
def test_a_data_directory_that_cannot_be_created_is_one_line() -> None:
    result = run_kshim("serve", "--listen", "127.0.0.1:0", "--data-dir", "/proc/kshim-data")
    assert_one_error_line(
        result,
        1,
        "kshim: error: cannot use data directory /proc/kshim-data: no such file or directory",
    )


def test_a_data_directory_whose_files_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    # A read-only directory would do, but tests may run as root, who writes anywhere: a
    # directory where the broker's first file must go fails the same way for everyone.
    data_dir = tmp_path / "data"
    os.makedirs(lock_path(str(data_dir)))
    result = run_kshim("serve", "--listen", "127.0.0.1:0", "--data-dir", str(data_dir))
    assert_one_error_line(
        result,
        1,
        f"kshim: error: cannot use data directory {data_dir}: is a directory "
        f"({lock_path(str(data_dir))})",
    )


def test_groups_without_a_broker_is_one_line() -> None:
    bootstrap = f"127.0.0.1:{free_port()}"
    result = run_kshim("groups", "--bootstrap", bootstrap)
    assert_one_error_line(
        result, 1, f"kshim groups: error: cannot query {bootstrap}: connection refused"
    )


def test_groups_naming_no_group_is_one_line(serving: Serving) -> None:
    result = run_kshim("groups", "--bootstrap", serving.bootstrap, "--group", "nosuch")
    assert_one_error_line(result, 1, "kshim groups: error: consumer group nosuch does not exist")
    assert result.stdout == ""


# Usage mistakes: exit status 2, and nothing else on stderr.


def test_an_unknown_log_level_lists_the_levels() -> None:
    result = run_kshim("serve", "--log-level", "verbose")
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith("kshim: error: argument --log-level: invalid choice: 'VERBOSE'")
    for level in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        assert level in line


def test_the_log_level_is_case_insensitive() -> None:
    assert build_parser().parse_args(["serve", "--log-level", "debug"]).log_level == "DEBUG"


def test_a_set_without_equals_names_the_argument() -> None:
    result = run_kshim("serve", "--set", "log.retention.ms")
    assert_one_error_line(result, 2, "kshim: error: --set log.retention.ms: expected KEY=VALUE")


def test_a_malformed_config_file_names_the_file_and_line(tmp_path: Path) -> None:
    properties = tmp_path / "server.properties"
    properties.write_text("log.retention.ms=1000\n# a comment\n= 3\n")
    result = run_kshim("serve", "--config", str(properties))
    assert_one_error_line(
        result,
        2,
        f"kshim: error: --config {properties}: line 3: expected key=value, "
        "got an entry without a key",
    )


def test_a_config_file_is_read_in_java_properties_syntax(tmp_path: Path) -> None:
    """``key value`` and continuation lines, as Kafka's server.properties allows: the
    value is read whole, so its mistake is reported under its key."""
    properties = tmp_path / "server.properties"
    properties.write_text("num.partitions 1\nlog.retention.ms \\\n    soon\n")
    result = run_kshim("serve", "--config", str(properties))
    assert_one_error_line(
        result,
        2,
        f"kshim: error: Invalid value soon for configuration log.retention.ms (from "
        f"{properties}): Not a number of type LONG",
    )


def test_a_missing_config_file_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "missing.properties"
    result = run_kshim("serve", "--config", str(missing))
    assert_one_error_line(
        result, 2, f"kshim: error: cannot read --config {missing}: no such file or directory"
    )


def test_an_invalid_value_names_its_key_and_source() -> None:
    result = run_kshim("serve", environment={"KSHIM_LOG_RETENTION_MS": "soon"})
    assert_one_error_line(
        result,
        2,
        "kshim: error: Invalid value soon for configuration log.retention.ms "
        "(from KSHIM_LOG_RETENTION_MS): Not a number of type LONG",
    )


def test_a_listen_port_out_of_range_names_the_range() -> None:
    result = run_kshim("serve", "--listen", "localhost:99999")
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith("kshim: error: argument --listen: 'localhost:99999': ")
    assert "the port must be 0-65535 (0 for any free port)" in line


def test_groups_with_a_bootstrap_not_host_port_is_one_line() -> None:
    result = run_kshim("groups", "--bootstrap", "nohost")
    assert_one_error_line(
        result,
        2,
        "kshim groups: error: argument --bootstrap: 'nohost' is not host:port; "
        "see 'kshim groups --help'",
    )


def test_no_command_is_one_line() -> None:
    result = run_kshim()
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith("kshim: error: the following arguments are required: command")


# What a broker that starts says.


def test_version() -> None:
    result = run_kshim("--version")
    assert result.returncode == 0
    assert result.stdout == f"kshim {importlib.metadata.version('kshim')}\n"
    assert result.stderr == ""


def test_unknown_keys_are_warned_once_each_and_the_broker_starts(tmp_path: Path) -> None:
    properties = tmp_path / "server.properties"
    properties.write_text("foo.bar=1\nnum.partitions=2\n")
    broker = start_serving(
        tmp_path / "data",
        "--config", str(properties), "--set", "made.up=1", "--set", "made.up=2",
        environment={"KSHIM_FOO_BAR": "2", "KSHIM_SPARK_JARS": "/jars", "KSHIM_NODE_ID": "3"},
    )  # fmt: skip
    _, stderr = broker.stop()
    warnings = [line for line in stderr.splitlines() if "foo.bar" in line or "made.up" in line]
    assert warnings == [
        f"kshim: warning: unknown configuration key foo.bar (from {properties}, KSHIM_FOO_BAR)",
        "kshim: warning: unknown configuration key made.up (from --set)",
    ]
    assert "spark.jars" not in stderr  # kshim's own tooling variable, not configuration
    assert "Traceback" not in stderr


def test_the_listening_line_is_printed_once(serving: Serving, data_dir: Path) -> None:
    stdout, stderr = serving.stop()
    match = LISTENING.match(serving.listening_line)
    assert match is not None and match[3] == "PLAINTEXT" and match[4] == str(data_dir)
    assert serving.listening_line.startswith(
        f"kshim listening on {serving.bootstrap} (PLAINTEXT), data in {data_dir}, metrics on "
        "http://127.0.0.1:"
    ), serving.listening_line
    assert "listening on" not in stdout + stderr


@pytest.mark.parametrize("signal_number", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_prints_what_was_flushed_once(
    serving: Serving, signal_number: signal.Signals
) -> None:
    _, stderr = serving.stop(signal_number)
    assert serving.process.returncode == 0
    assert "Traceback" not in stderr
    [stopped] = [line for line in stderr.splitlines() if line.startswith("kshim stopped")]
    assert STOPPED.match(stopped), stopped


def test_the_stop_line_counts_the_records_made_durable(serving: Serving) -> None:
    """Each round's bytes go through the write-ahead log or, for a round over one
    partition, straight to its segment file: the line counts both."""
    payload = [b"x" * 1000] * 100
    create_topic(serving.bootstrap, "stop-line", 1, {})
    with connect(serving.bootstrap) as conn:
        for _ in range(20):
            answer = conn.call(PRODUCE, 9, produce_fields({("stop-line", 0): make_batch(payload)}))
            assert answer.responses[0].partition_responses[0].error_code == 0
    _, stderr = serving.stop()
    [stopped] = [line for line in stderr.splitlines() if line.startswith("kshim stopped")]
    matched = STOPPED.match(stopped)
    assert matched, stopped
    total, wal, direct = (int(group) for group in matched.groups())
    assert total == wal + direct
    assert total >= 20 * 100 * 1000


# The configuration's sources, in process.


def test_known_keys_and_tooling_variables_are_not_warned() -> None:
    warnings: list[str] = []
    arguments = build_parser().parse_args(["serve", "--set", "retention.ms=5"])
    environment = {"KSHIM_NUM_PARTITIONS": "2", "KSHIM_SPARK_JARS": "/jars", "KSHIM_": "x"}
    config = load_config(arguments, environment, warnings.append)
    assert config.get_int("num.partitions") == 2
    assert warnings == ["unknown configuration key retention.ms (from --set)"]


def test_a_set_with_two_entries_is_refused() -> None:
    arguments = argparse.Namespace(
        config=None, set=["a=1\nb=2"], listen=None, data_dir=None, advertised=None,
        review_hook=None,
    )  # fmt: skip
    with pytest.raises(ConfigError, match=r"^--set a=1\nb=2: expected KEY=VALUE$"):
        load_config(arguments, {}, lambda message: None)

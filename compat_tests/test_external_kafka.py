"""The comparisons' own Kafka: KSHIM_KAFKA_BOOTSTRAP (one already running) and KSHIM_KAFKA_CMD
(one the suite or the benchmark starts), checked without a Kafka.

A kshim broker stands in for Kafka: started here as the "already running" one, or by the
command. The stand-in runs with ``num.partitions=2``, unlike Kafka's and kshim's default of
1, so that one scenario really does differ and the report's disagreement listing has
something to list. The suite and the benchmark run in child processes, on a couple of
scenarios and tiny workloads, so that what is checked is what a user runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compat_tests import comparison, report
from compat_tests.brokers import SELECTION_VARIABLE, Selection, selection
from compat_tests.deviations import IntendedDifference
from compat_tests.kafka_sources import (
    BOOTSTRAP,
    BOOTSTRAP_VARIABLE,
    COMMAND,
    COMMAND_VARIABLE,
    CONTAINER,
    JARS,
    KafkaSource,
    answers_api_versions,
    command_line,
    group_members,
    kafka_source,
    launched,
)
from compat_tests.outcomes import OUTPUT_VARIABLE
from compat_tests.support import reference
from kshim.jvm import artifacts
from kshim.testing import BrokerProcess

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parent.parent
CHILD_TIMEOUT_S = 240
CONTAINER_SOURCE = KafkaSource(CONTAINER)
STAND_IN_SETTINGS = ("kshim.metrics.listen=", "num.partitions=2")
# A kshim that a command starts, as a Kafka start script would start Kafka. It writes the
# shell's PID and a background helper's (same process group) where the test can find them.
KSHIM_COMMAND = (
    "sleep 300 & echo $! > {pids}/helper; echo $$ > {pids}/shell; exec "
    f"{sys.executable} -m kshim serve --listen 127.0.0.1:{{port}} --data-dir {{data_dir}} "
    "--set kshim.metrics.listen="
)
WIRE = "compat_tests/test_wire.py"
NOT_SMOKE = f"{WIRE}::test_fetch_without_waiting_returns_the_available_data[kafka]"
SMOKE = f"{WIRE}::test_api_versions_v0_lists_the_core_apis[kafka]"
AUTO_CREATE = "test_topics::test_producing_to_an_unknown_topic_creates_it[kafka-python]"


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """The "already running Kafka": a kshim this module starts, holding a topic of someone
    else's that the suite must neither assume absent nor touch."""
    broker = BrokerProcess(tmp_path_factory.mktemp("stand-in") / "data", STAND_IN_SETTINGS)
    broker.start()
    assert reference().create_topic(broker.bootstrap, "someone-elses-topic") == 0
    yield broker
    broker.stop()


def child_environment(**variables: str) -> dict[str, str]:
    """This environment without the variables choosing brokers (a developer's own Kafka
    included), plus ``variables``."""
    chosen = {BOOTSTRAP_VARIABLE, COMMAND_VARIABLE, SELECTION_VARIABLE, OUTPUT_VARIABLE}
    environment = {name: value for name, value in os.environ.items() if name not in chosen}
    return environment | variables


def run_child(arguments: list[str], environment: dict[str, str]) -> tuple[int, str]:
    """``python -m arguments``; returns its exit status and the end of what it printed."""
    command = [sys.executable, "-m", *arguments]
    finished = subprocess.run(
        command, check=False, cwd=ROOT, env=environment, capture_output=True,
        timeout=CHILD_TIMEOUT_S,
    )  # fmt: skip
    printed = (finished.stdout + finished.stderr).decode(errors="replace")
    return finished.returncode, printed[-3000:]


def run_scenarios(tmp_path: Path, node_ids: list[str], **variables: str) -> list[dict[str, Any]]:
    """Runs ``node_ids`` in a child pytest; returns its outcome records."""
    output = tmp_path / "outcomes.json"
    environment = child_environment(**variables, **{OUTPUT_VARIABLE: str(output)})
    arguments = ["pytest", *node_ids, "-p", "compat_tests.outcomes", "-q", "-p", "no:cacheprovider"]
    _, printed = run_child(arguments, environment)
    assert output.exists(), printed
    records: list[dict[str, Any]] = json.loads(output.read_text())["records"]
    return records


@contextlib.contextmanager
def command_pids(directory: Path) -> Iterator[dict[str, int]]:
    """The PIDs the command wrote (filled in as the block reads them); any still alive at
    the end are killed, so a failing test leaves nothing running."""
    pids: dict[str, int] = {}
    try:
        yield pids
    finally:
        for name in ("shell", "helper"):
            path = directory / name
            if path.exists() and is_alive(int(path.read_text())):
                os.kill(int(path.read_text()), signal.SIGKILL)


def read_pids(directory: Path, pids: dict[str, int]) -> dict[str, int]:
    pids.update({name: int((directory / name).read_text()) for name in ("shell", "helper")})
    return pids


def is_alive(pid: int) -> bool:
    """True for a running process (a zombie, exited but not reaped, counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_bootstrap_then_command_then_jars_then_container(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    both = {BOOTSTRAP_VARIABLE: "kafka.example:9092", COMMAND_VARIABLE: "start {port}"}

    assert kafka_source(both) == KafkaSource(BOOTSTRAP, "kafka.example:9092")
    assert kafka_source({COMMAND_VARIABLE: "start {port}"}) == KafkaSource(COMMAND, "start {port}")
    neither = {BOOTSTRAP_VARIABLE: " ", COMMAND_VARIABLE: ""}
    with_tools = artifacts.tools_problem() is None or artifacts.cached_jars("kafka") is not None
    assert kafka_source(neither) == (KafkaSource(JARS, "kafka") if with_tools else CONTAINER_SOURCE)
    # With an empty cache and no Maven on PATH, the jars cannot be had: testcontainers then.
    monkeypatch.setenv(artifacts.CACHE_VARIABLE, str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert kafka_source(neither) == CONTAINER_SOURCE
    assert kafka_source(both).external
    assert not kafka_source({COMMAND_VARIABLE: "start {port}"}).external
    with pytest.raises(ValueError, match="host:port"):
        kafka_source({BOOTSTRAP_VARIABLE: "no-port"})
    with pytest.raises(ValueError, match="must contain"):
        kafka_source({COMMAND_VARIABLE: "kafka-server-start.sh server.properties"})


def test_a_kafka_asked_for_runs_every_scenario(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Kafka from the jars, or one named by the variables, runs every scenario, alone and
    behind two gateways and behind one; Kafka in Docker (no Java or Maven here) the smoke set
    only."""
    if kafka_source({}).kind == JARS:
        expected = Selection(
            full=("kshim", "kafka", "gateway", "one-gateway"), smoke_only=("tansu",)
        )
        assert selection({}) == expected
    monkeypatch.setenv(artifacts.CACHE_VARIABLE, str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert selection({}).smoke_only == ("tansu", "kafka", "gateway", "one-gateway")
    assert selection({BOOTSTRAP_VARIABLE: "127.0.0.1:9092"}).full == (
        "kshim",
        "kafka",
        "gateway",
        "one-gateway",
    )
    assert selection({COMMAND_VARIABLE: "start {port}"}).smoke_only == ("tansu",)
    named = {SELECTION_VARIABLE: "kafka", BOOTSTRAP_VARIABLE: "127.0.0.1:9092"}
    assert selection(named).brokers == ("kafka",)


def test_command_placeholders_are_replaced_and_other_braces_kept() -> None:
    template = "KAFKA_HEAP_OPTS=${HEAP:-1g} start --port {port} --dirs {data_dir} {port}"

    line = command_line(template, 9093, "/tmp/d")

    assert line == "KAFKA_HEAP_OPTS=${HEAP:-1g} start --port 9093 --dirs /tmp/d 9093"


def test_a_started_command_is_a_process_group_stopped_at_the_end(tmp_path: Path) -> None:
    with command_pids(tmp_path) as pids:
        with launched(KSHIM_COMMAND.replace("{pids}", str(tmp_path))) as kafka:
            read_pids(tmp_path, pids)
            assert answers_api_versions("127.0.0.1", kafka.port)
            assert set(kafka.pids()) == {pids["shell"], pids["helper"]}  # exec: shell is kshim
            assert Path(kafka.data_dir).is_dir()

        assert not is_alive(pids["shell"]) and not is_alive(pids["helper"])
        assert group_members(kafka.process_group) == []


def test_a_command_that_exits_says_what_it_printed() -> None:
    with (
        pytest.raises(RuntimeError, match=r"exited before answering(.|\n)*no such broker"),
        launched("echo no such broker on {port}; exit 3"),
    ):
        pass


@pytest.mark.slow
def test_every_scenario_runs_on_an_external_kafka_which_is_left_running(
    stand_in: BrokerProcess, tmp_path: Path
) -> None:
    """Without KSHIM_COMPAT_BROKERS: a scenario outside the smoke set runs on Kafka too; the
    stand-in runs on, with someone else's topic, and without the topics the run made."""
    records = run_scenarios(tmp_path, [NOT_SMOKE, SMOKE], KSHIM_KAFKA_BOOTSTRAP=stand_in.bootstrap)

    assert {(r["scenario"], r["broker"], r["outcome"]) for r in records} == {
        ("test_wire::test_fetch_without_waiting_returns_the_available_data", "kafka", "passed"),
        ("test_wire::test_api_versions_v0_lists_the_core_apis", "kafka", "passed"),
    }
    assert stand_in.is_running()
    assert reference().list_topics(stand_in.bootstrap) == {"someone-elses-topic"}


@pytest.mark.slow
def test_a_kafka_from_the_command_is_started_and_stopped(tmp_path: Path) -> None:
    command = KSHIM_COMMAND.replace("{pids}", str(tmp_path))
    with command_pids(tmp_path) as pids:
        records = run_scenarios(tmp_path, [NOT_SMOKE], KSHIM_KAFKA_CMD=command)

        read_pids(tmp_path, pids)
        assert [(r["broker"], r["outcome"]) for r in records] == [("kafka", "passed")]
        assert not is_alive(pids["shell"]) and not is_alive(pids["helper"])


@pytest.mark.slow
def test_the_report_lists_where_kafka_and_kshim_disagree(
    stand_in: BrokerProcess, tmp_path: Path
) -> None:
    """The stand-in auto-creates topics with 2 partitions, Kafka's and kshim's default is 1."""
    results = tmp_path / "RESULTS.md"
    keyword = "test_producing_to_an_unknown_topic_creates_it and kafka-python"
    arguments = ["compat_tests.report", "--brokers", "kshim,kafka", "--output", str(results)]
    environment = child_environment(KSHIM_KAFKA_BOOTSTRAP=stand_in.bootstrap)

    status, printed = run_child([*arguments, "--", "-k", keyword], environment)

    text = results.read_text()
    assert status == 1, printed  # a scenario failed, on "Kafka"
    assert f"Kafka: the already running Kafka at {stand_in.bootstrap}" in text
    assert "| scenario | kshim | kafka | tags |" in text
    section = text.split("## kshim and Kafka disagree", 1)[1].split("\n## ", 1)[0]
    assert "Of 1 scenarios run on both, kshim and Kafka disagree on 1: 1 that no" in section
    unexplained, explained = section.split("Explained by an intended difference", 1)
    assert f"| `{AUTO_CREATE}` | pass | **fail**: " in unexplained
    assert "- none" in explained
    assert stand_in.is_running()


def run_benchmark(output: Path, brokers: str, *options: str, **variables: str) -> dict[str, Any]:
    """benchmarks.run on tiny counts, throughput only; returns its report.json."""
    arguments = ["benchmarks.run", "--smoke", "--workloads", "throughput", "--brokers", brokers]
    status, printed = run_child(
        [*arguments, "--output", str(output), *options], child_environment(**variables)
    )
    assert status == 0, printed
    results: dict[str, Any] = json.loads((output / "report.json").read_text())
    return results


@pytest.mark.slow
def test_the_benchmark_measures_no_process_of_an_external_kafka(
    stand_in: BrokerProcess, tmp_path: Path
) -> None:
    """Its column is filled, its CPU and memory are "not measured", it is left running and
    without the benchmark's topics."""
    results = run_benchmark(tmp_path, "kshim,kafka", "--kafka-bootstrap", stand_in.bootstrap)

    [kshim], [kafka] = (results["samples"]["throughput"][name] for name in ("kshim", "kafka"))
    assert kafka["produce_100B_records_per_s"] > 0 and kafka["consume_1KiB_records_per_s"] > 0
    assert {name for name in kafka if "broker" in name} == set()
    assert {"broker_cpu_s", "broker_peak_rss_mb"} <= set(kshim)
    report = (tmp_path / "report.md").read_text()
    assert f"- kafka: the already running Kafka at {stand_in.bootstrap}" in report
    assert "kafka: CPU, memory, disk and start time not measured" in report
    assert "| throughput.broker_cpu_s | " in report
    [cpu_row] = [line for line in report.splitlines() if "| throughput.broker_cpu_s |" in line]
    assert cpu_row.endswith("| not measured | - |")
    assert stand_in.is_running()
    assert reference().list_topics(stand_in.bootstrap) == {"someone-elses-topic"}


@pytest.mark.slow
def test_the_benchmark_measures_and_stops_the_kafka_its_command_started(tmp_path: Path) -> None:
    command = KSHIM_COMMAND.replace("{pids}", str(tmp_path))
    with command_pids(tmp_path) as pids:
        results = run_benchmark(tmp_path / "bench", "kafka", KSHIM_KAFKA_CMD=command)

        read_pids(tmp_path, pids)
        [kafka] = results["samples"]["throughput"]["kafka"]
        assert kafka["broker_cpu_s"] > 0 and kafka["broker_peak_rss_mb"] > 10
        assert results["not_measured"] == {}
        assert results["kafka"].startswith("a Kafka started by KSHIM_KAFKA_CMD")
        assert not is_alive(pids["shell"]) and not is_alive(pids["helper"])


def record(scenario: str, broker: str, outcome: str, message: str = "") -> dict[str, Any]:
    return {"scenario": scenario, "broker": broker, "outcome": outcome, "message": message}


def test_disagreements_leave_out_skips_and_name_intended_differences() -> None:
    records = [
        record("m::same", "kshim", "passed"),
        record("m::same", "kafka", "passed"),
        record("m::differs", "kshim", "passed"),
        record("m::differs", "kafka", "failed", "assert 2 == 1"),
        record("m::intended[x]", "kshim", "failed", "by design"),
        record("m::intended[x]", "kafka", "passed"),
        record("m::skipped", "kshim", "skipped"),
        record("m::skipped", "kafka", "failed"),
        record("m::tansu-only", "tansu", "xfailed"),
    ]
    differences = [IntendedDifference("K99", "a choice", "a reason", ("m::intended*",))]

    found = comparison.disagreements(records, differences=differences)

    assert comparison.compared(records) == ["m::same", "m::differs", "m::intended[x]"]
    assert [(item.scenario, item.explained_by) for item in found] == [
        ("m::differs", None),
        ("m::intended[x]", "K99"),
    ]
    lines = comparison.section(records, "a stand-in", differences)
    assert "| `m::differs` | pass | **fail**: assert 2 == 1 |" in lines
    assert "| `m::intended[x]` | **fail**: by design | pass | K99 |" in lines


def test_no_comparison_without_kafka() -> None:
    records = [record("m::a", "kshim", "passed"), record("m::a", "kafka", "skipped", "no Docker")]

    assert comparison.section(records, "none") == [
        "Kafka ran no scenario here, so nothing was compared."
    ]


def test_check_fails_the_run_only_on_unexplained_disagreements(
    capsys: pytest.CaptureFixture[str],
) -> None:
    agreeing = [record("m::same", "kshim", "passed"), record("m::same", "kafka", "passed")]
    explained = [
        record("m::intended[x]", "kshim", "xfailed", "by design"),
        record("m::intended[x]", "kafka", "passed"),
    ]
    unexplained = [
        record("m::differs", "kshim", "passed"),
        record("m::differs", "kafka", "failed", "assert 2 == 1"),
    ]
    differences = [IntendedDifference("K99", "a choice", "a reason", ("m::intended*",))]

    assert report.check(agreeing + explained, differences) == 0
    assert report.check(agreeing + explained + unexplained, differences) == 1
    printed = capsys.readouterr().out
    assert "3 scenarios compared, 2 disagreements, 1 not explained" in printed
    assert "m::differs: kshim pass; Kafka **fail**: assert 2 == 1" in printed


def test_a_gateway_differing_from_kafka_fails_the_run_even_where_kshim_may(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A gateway relays to a Kafka: kshim's intended differences explain none of its
    disagreements with Kafka alone."""
    differences = [IntendedDifference("K99", "a choice", "a reason", ("m::intended*",))]
    agreeing = [
        record("m::intended[x]", "kshim", "xfailed", "by design"),
        record("m::intended[x]", "kafka", "passed"),
        record("m::intended[x]", "gateway", "passed"),
        record("m::intended[x]", "one-gateway", "skipped"),
    ]
    differing = [record("m::intended[x]", "one-gateway", "failed", "assert 0 == 1")]

    assert report.check(agreeing, differences) == 0
    assert report.check(agreeing[:3] + differing, differences) == 1
    printed = capsys.readouterr().out
    assert "gateway and Kafka: 1 scenarios compared, 0 disagreements" in printed
    assert "one-gateway and Kafka: 1 scenarios compared, 1 disagreements" in printed
    assert "m::intended[x]: one-gateway **fail**: assert 0 == 1; Kafka pass" in printed
    assert report.gateway_section(agreeing[:3] + differing)[-1] == (
        "  - `m::intended[x]`: one-gateway **fail**: assert 0 == 1; Kafka pass"
    )

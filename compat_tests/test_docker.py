"""The Docker packaging, checked without Docker: the image's command against kshim's real
CLI, the compose wiring, and the protocol-speaking health check against live brokers."""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from compat_tests.brokers import BrokerUnderTest
from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.config.keys import from_environment
from kshim.cli.config_sources import load_config
from kshim.cli.main import build_parser
from kshim.testing import free_port

pytestmark = [pytest.mark.docker, pytest.mark.timeout(60)]

ROOT = Path(__file__).resolve().parent.parent
DOCKER = ROOT / "docker"
DATA_DIR = "/var/lib/kshim"


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    joined, pending = [], ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        joined.append(pending + line)
        pending = ""
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in joined]


def only(parsed: list[tuple[str, str]], instruction: str) -> str:
    values = [arguments for name, arguments in parsed if name == instruction]
    assert len(values) == 1, f"expected one {instruction}, found {values}"
    return values[0]


def exec_form(arguments: str) -> list[str]:
    value = json.loads(arguments)
    assert isinstance(value, list) and all(isinstance(part, str) for part in value)
    return value


def image_environment(parsed: list[tuple[str, str]]) -> dict[str, str]:
    """The KSHIM_* variables the Dockerfile's ENV sets."""
    text = " ".join(arguments for name, arguments in parsed if name == "ENV")
    return dict(re.findall(r"(KSHIM_[A-Z_]+)=(\S+)", text))


def test_dockerfile_image_shape() -> None:
    parsed = instructions(DOCKER / "Dockerfile")

    assert only(parsed, "FROM") == "python:3.11-slim"
    assert only(parsed, "USER") not in {"root", "0"}
    assert exec_form(only(parsed, "VOLUME")) == [DATA_DIR]
    assert only(parsed, "EXPOSE") == "9092 9308"
    assert "useradd" in " ".join(arguments for name, arguments in parsed if name == "RUN")
    for name, arguments in parsed:
        if name == "COPY":
            *sources, _ = arguments.split()
            assert all((ROOT / source).exists() for source in sources), arguments


def test_build_context_holds_only_what_the_dockerfile_copies() -> None:
    """.dockerignore is an allow-list: everything is left out but the Dockerfile's COPY
    sources, so no virtual environment, cache or data directory is sent to the builder."""
    lines = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()]
    patterns = [line for line in lines if line and not line.startswith("#")]
    copied = {
        source
        for name, arguments in instructions(DOCKER / "Dockerfile")
        if name == "COPY"
        for source in arguments.split()[:-1]
        if not source.startswith("--")
    }

    assert patterns[0] == "*"
    assert {pattern[1:] for pattern in patterns if pattern.startswith("!")} == copied


def test_compose_publishes_ports_on_loopback_only() -> None:
    """A compose file run on a laptop or a shared host exposes nothing beyond it unless
    the operator publishes a port on another interface."""
    for name, service in load_compose()["services"].items():
        for published in service.get("ports", []):
            assert str(published).startswith("127.0.0.1:"), (name, published)


def test_dockerfile_command_matches_the_cli() -> None:
    """ENTRYPOINT + CMD parse with kshim's own parser into a config listening on all
    interfaces, storing in the volume and advertising the ENV default."""
    parsed = instructions(DOCKER / "Dockerfile")
    entrypoint = exec_form(only(parsed, "ENTRYPOINT"))
    command = exec_form(only(parsed, "CMD"))
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]

    arguments = build_parser().parse_args(command)
    environment = image_environment(parsed)
    config = load_config(arguments, environment)

    assert entrypoint == ["kshim"]
    # The console script's launcher runs `serve` with kshim/cli/serve_command.py's parser,
    # whose options are those of build_parser's serve (add_serve_arguments).
    assert scripts["kshim"] == "kshim.launcher:main"
    assert (arguments.command, arguments.listen, arguments.data_dir) == (
        "serve",
        "0.0.0.0:9092",
        DATA_DIR,
    )
    assert config.values["listeners"] == "PLAINTEXT://0.0.0.0:9092"
    assert config.metrics_address() == ("0.0.0.0", 9308)  # for Prometheus outside
    assert config.values["log.dirs"] == DATA_DIR
    assert from_environment(environment) == {"advertised.listeners": "PLAINTEXT://localhost:9092"}
    assert config.values["advertised.listeners"] == "PLAINTEXT://localhost:9092"


def test_dockerfile_health_check_runs_the_protocol_probe_and_asks_readiness() -> None:
    health = only(instructions(DOCKER / "Dockerfile"), "HEALTHCHECK")
    options, _, command = health.partition(" CMD ")

    assert exec_form(command) == [
        "python", "-m", "kshim.healthcheck", "127.0.0.1:9092", "http://127.0.0.1:9308/healthz",
    ]  # fmt: skip
    assert re.search(r"--timeout=(\d+)s", options) and re.search(r"--interval=\d+s", options)


def load_compose() -> dict[str, Any]:
    """compose.yaml through PyYAML when installed; otherwise the check below is textual."""
    text = (DOCKER / "compose.yaml").read_text()
    try:
        import yaml
    except ImportError:
        pytest.skip("PyYAML is not installed; test_compose_text covers the file")
    loaded = yaml.safe_load(text)
    assert isinstance(loaded, dict)
    return loaded


def test_compose_wiring() -> None:
    compose = load_compose()
    kshim, job = compose["services"]["kshim"], compose["services"]["spark-job"]

    assert kshim["build"] == {"context": "..", "dockerfile": "docker/Dockerfile"}
    assert (DOCKER / kshim["build"]["context"] / kshim["build"]["dockerfile"]).is_file()
    assert kshim["environment"]["KSHIM_ADVERTISED_LISTENERS"] == (
        "INTERNAL://kshim:9092,EXTERNAL://localhost:19092"
    )
    assert kshim["volumes"] == [f"kshim-data:{DATA_DIR}"]
    assert "kshim-data" in compose["volumes"]
    assert job["depends_on"] == {"kshim": {"condition": "service_healthy"}}
    assert job["environment"]["KAFKA_BOOTSTRAP"] == "kshim:9092"
    for mount in job["volumes"]:
        source, target, mode = mount.split(":")
        assert (DOCKER / source).exists(), source
        assert target.startswith(job["working_dir"]) and mode == "ro"
    spark_version = re.match(r"spark:(\d+\.\d+\.\d+)-scala(\d+\.\d+)-", job["image"])
    assert spark_version is not None, job["image"]
    version, scala = spark_version.groups()
    assert f"org.apache.spark:spark-sql-kafka-0-10_{scala}:{version}" in job["command"]
    assert job["command"][-1] == "/job/spark_roundtrip.py"


def test_compose_text() -> None:
    """The same wiring without a YAML parser: the lines that matter are present."""
    text = (DOCKER / "compose.yaml").read_text()

    for expected in (
        "dockerfile: docker/Dockerfile",
        "KSHIM_ADVERTISED_LISTENERS: INTERNAL://kshim:9092,EXTERNAL://localhost:19092",
        "condition: service_healthy",
        "KAFKA_BOOTSTRAP: kshim:9092",
        "../spark_examples:/job/spark_examples:ro",
    ):
        assert expected in text, expected


def compose_broker_config(compose: dict[str, Any]) -> tuple[argparse.Namespace, BrokerConfig]:
    """The compose broker's arguments and configuration as kshim would load them in the
    container: the image's ENV overridden by the service's environment, the service's
    command."""
    kshim = compose["services"]["kshim"]
    environment = {**image_environment(instructions(DOCKER / "Dockerfile")), **kshim["environment"]}
    arguments = build_parser().parse_args(kshim["command"])
    return arguments, load_config(arguments, environment)


def test_compose_broker_has_an_internal_and_an_external_listener() -> None:
    """Containers on the compose network are told kshim:9092, the host localhost:19092
    (published as itself); the service runs the image's command without --listen, which
    would replace both listeners with one."""
    compose = load_compose()
    services = compose["services"]
    arguments, config = compose_broker_config(compose)
    image_command = exec_form(only(instructions(DOCKER / "Dockerfile"), "CMD"))
    listen_at = image_command.index("--listen")
    listeners = [(item.name, item.security_protocol, item.port) for item in config.listeners()]

    assert services["kshim"]["command"] == [
        *image_command[:listen_at],
        *image_command[listen_at + 2 :],
    ]
    assert arguments.listen is None
    assert listeners == [("INTERNAL", "PLAINTEXT", 9092), ("EXTERNAL", "PLAINTEXT", 19092)]
    assert all(item.host == "0.0.0.0" for item in config.listeners())
    assert config.advertised_addresses() == {
        "INTERNAL": ("kshim", 9092),
        "EXTERNAL": ("localhost", 19092),
    }
    assert services["kshim"]["ports"] == ["127.0.0.1:19092:19092", "127.0.0.1:9308:9308"]
    assert config.values["log.dirs"] == DATA_DIR
    assert config.metrics_address() == ("0.0.0.0", 9308)
    # The image's health check and the Spark job use the internal listener.
    assert "127.0.0.1:9092" in only(instructions(DOCKER / "Dockerfile"), "HEALTHCHECK")
    assert services["spark-job"]["environment"]["KAFKA_BOOTSTRAP"] == "kshim:9092"


def test_spark_job_uses_the_session_helper() -> None:
    tree = ast.parse((DOCKER / "spark_roundtrip.py").read_text())
    imported = {
        (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }

    assert ("spark_examples.spark_session", "kafka_spark_session") in imported
    assert (ROOT / "spark_examples" / "spark_session.py").is_file()


def run_healthcheck(address: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kshim.healthcheck", address],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        cwd=ROOT,
    )


@pytest.mark.compat_smoke
def test_healthcheck_passes_against_a_running_broker(broker: BrokerUnderTest) -> None:
    # One address, as a container's health check asks its own: the gateway column has two.
    completed = run_healthcheck(f"{broker.host}:{broker.port}")

    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.startswith("healthy: ")


def test_healthcheck_fails_without_a_broker() -> None:
    completed = run_healthcheck(f"127.0.0.1:{free_port()}")

    assert completed.returncode == 1
    assert completed.stderr.startswith("unhealthy: ")

"""The Docker image built and run, and the compose broker reached from another container.

Runs only where a Docker daemon answers; otherwise every test skips with the reason
(test_docker.py checks the same files without Docker).

- The image is built once for the module from the repository root, under a tag unique to
  the run, and its size is reported.
- One container, its Kafka port published on loopback and advertised at that address: the
  seconds from ``docker start`` to the first answered health probe are reported, a record
  goes through with confluent-kafka, Docker's health status turns ``healthy`` within the
  HEALTHCHECK's start period and one interval, and ``docker stop`` (SIGTERM) ends it with
  exit code 0.
- The compose file's broker, under a project name unique to the run: a second container
  on the compose network reaches it by its service name (``kshim:9092``, what the broker
  advertises there) and the host at ``localhost:19092``. Needs host ports 19092 and 9308
  free, as the compose file publishes them.

Only what the tests create is removed, in ``finally``: the image tag, the containers by id
with their anonymous volumes, the compose project with its network and volume.
Measurements are printed in the terminal and recorded with ``record_property`` (junitxml).

The daemon is asked through the docker CLI, not docker-py as brokers.py asks for
testcontainers (which talks through docker-py): every step here is a CLI command, compose
is a CLI plugin, and the CLI and docker-py can point at different daemons (docker contexts).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, Producer
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AdminClient

from kshim.healthcheck import UnhealthyError, probe
from kshim.testing import free_port

RecordProperty = Callable[[str, object], None]  # pytest's record_property fixture

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(1200)]

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "docker" / "Dockerfile"
COMPOSE_FILE = ROOT / "docker" / "compose.yaml"
RUN_ID = uuid.uuid4().hex[:12]  # names what this run creates: image tag, project, topics

COMMAND_TIMEOUT_S = 60.0  # one docker command: info, create, start, inspect, rm
BUILD_TIMEOUT_S = 600.0  # pulls python:3.11-slim and pip-installs kshim's wheels
COMPOSE_UP_TIMEOUT_S = 180.0  # up --wait returns once the broker reports healthy
START_TIMEOUT_S = 60.0  # docker start to an answered health probe
STOP_GRACE_S = 30  # docker stop -t: SIGTERM, then SIGKILL (exit code 137) after this
HEALTH_MARGIN_S = 30.0
CLIENT_TIMEOUT_S = 30.0
POLL_S = 0.1
IMAGE_SIZE_LIMIT_BYTES = 1_000_000_000  # a few hundred MB is expected; more means a stray COPY
COMPOSE_SERVICE = "kshim"
INTERNAL_BOOTSTRAP = "kshim:9092"  # the compose broker's INTERNAL advertised listener
EXTERNAL_BOOTSTRAP = "localhost:19092"  # its EXTERNAL one, published on the host
INSIDE_VALUE = "from inside the compose network"

# Run by a second container on the compose network. aiokafka bootstraps from the service
# name, then connects to the address the broker advertises; prints that address and the
# record it wrote and read back, which it can only if that address answers in the network.
INSIDE_ROUND_TRIP = """
import asyncio, sys
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

async def main(bootstrap, topic, value):
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for broker in producer.client.cluster.brokers():
            print(f"{broker.host}:{broker.port}")
        await producer.send_and_wait(topic, value.encode(), partition=0)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, 0)])
        print((await consumer.getone()).value.decode())
    finally:
        await consumer.stop()

asyncio.run(asyncio.wait_for(main(*sys.argv[1:4]), 60))
"""


def docker(*arguments: str, timeout_s: float = COMMAND_TIMEOUT_S, check: bool = True) -> str:
    """Runs ``docker ARGUMENTS`` from the repository root; returns its stdout, stripped.
    With ``check``, raises AssertionError (with the end of stderr) on a non-zero exit."""
    completed = subprocess.run(
        ["docker", *arguments],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
        cwd=ROOT,
    )
    if check and completed.returncode != 0:
        raise AssertionError(
            f"docker {' '.join(arguments[:3])} ... exited {completed.returncode}:\n"
            + completed.stderr[-3000:]
        )
    return completed.stdout.strip()


def docker_unavailable_reason() -> str | None:
    """Why the docker CLI cannot drive a daemon here, or None when ``docker info`` answers."""
    if shutil.which("docker") is None:
        return "the docker CLI is not installed"
    try:
        completed = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"docker info did not answer within {COMMAND_TIMEOUT_S:.0f} s"
    if completed.returncode != 0 or not completed.stdout.strip():
        lines = completed.stderr.strip().splitlines()
        return f"no Docker daemon answered docker info ({lines[0] if lines else 'no output'})"
    return None


def compose_unavailable_reason() -> str | None:
    """Why ``docker compose`` cannot run here, or None."""
    version = subprocess.run(
        ["docker", "compose", "version"],
        capture_output=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )
    if version.returncode != 0:
        return "the docker compose plugin is not installed (docker compose version fails)"
    return None


def report(capsys: pytest.CaptureFixture[str], line: str) -> None:
    """Writes ``line`` to the terminal, past pytest's output capture."""
    with capsys.disabled():
        print(f"\n{line}")


def health_check_seconds(option: str) -> float:
    """A duration option (``--interval=10s``) of the Dockerfile's HEALTHCHECK, in seconds."""
    found = re.search(rf"--{option}=(\d+)s", DOCKERFILE.read_text())
    assert found is not None, f"HEALTHCHECK has no --{option}=<seconds>s"
    return float(found.group(1))


def container_logs(container: str) -> str:
    completed = subprocess.run(
        ["docker", "logs", container],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )
    return completed.stdout + completed.stderr


def wait_for_probe(host: str, port: int, timeout_s: float) -> None:
    """Returns once an ApiVersions probe (kshim.healthcheck, as the HEALTHCHECK runs it)
    answers at host:port; raises TimeoutError with the last failure."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            probe(host, port, timeout_s=2.0)
            return
        except UnhealthyError as error:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"no broker answered after {timeout_s} s: {error}") from error
        time.sleep(POLL_S)


def wait_for_health(container: str, deadline: float) -> str:
    """Docker's health status of ``container`` once it is settled or ``deadline``
    (time.monotonic) passes: ``healthy``, ``unhealthy`` or still ``starting``."""
    while True:
        status = docker("inspect", "--format", "{{.State.Health.Status}}", container)
        if status != "starting" or time.monotonic() >= deadline:
            return status
        time.sleep(1.0)


def advertised_brokers(bootstrap: str) -> list[tuple[str, int]]:
    """The broker addresses the Metadata answer at ``bootstrap`` gives clients."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=CLIENT_TIMEOUT_S)
    # str(): confluent-kafka's BrokerMetadata declares host by its placeholder, None.
    return sorted((str(broker.host), broker.port) for broker in metadata.brokers.values())


def produce(bootstrap: str, topic: str, value: bytes) -> None:
    """Produces ``value`` to partition 0 of ``topic`` (created on first use) and waits for
    its acknowledgement; raises AssertionError if it is not acknowledged."""
    errors: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 30_000})
    producer.produce(topic, value, partition=0, on_delivery=lambda error, _: errors.append(error))
    assert producer.flush(CLIENT_TIMEOUT_S) == 0, "a record was still unacknowledged"
    assert errors == [None], errors


def consume(bootstrap: str, topic: str, count: int) -> list[bytes | None]:
    """The values of the first ``count`` records of partition 0 of ``topic``, fewer if they
    do not arrive within CLIENT_TIMEOUT_S."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"docker-smoke-{RUN_ID}",  # librdkafka needs one even to assign
            "enable.auto.commit": False,
        }
    )
    values: list[bytes | None] = []
    try:
        consumer.assign([ConfluentPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while len(values) < count and time.monotonic() < deadline:
            message: Message | None = consumer.poll(1.0)
            if message is not None:
                assert message.error() is None, message.error()
                values.append(message.value())
    finally:
        consumer.close()
    return values


def run_to_completion(image: str, network: str, *command: str) -> str:
    """Runs ``command`` in a new container of ``image`` on ``network``; returns its standard
    output, raising AssertionError when it exits non-zero. The container is removed."""
    container = docker(
        "create", "--network", network, "--entrypoint", command[0], image, *command[1:]
    )
    try:
        docker("start", container)
        exit_code = docker("wait", container, timeout_s=2 * CLIENT_TIMEOUT_S + COMMAND_TIMEOUT_S)
        assert exit_code == "0", f"{command[:3]} exited {exit_code}:\n{container_logs(container)}"
        return docker("logs", container)  # its standard output only
    finally:
        docker("rm", "--force", "--volumes", container, check=False)


@pytest.fixture(scope="module", autouse=True)
def docker_daemon() -> None:
    """Skips every test of the module, with the reason, when no Docker daemon answers."""
    reason = docker_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture(scope="module")
def image(docker_daemon: None) -> Iterator[str]:
    """The image built from the repository root (once a daemon answers); yields its tag,
    unique to this run.

    The tag is removed at the end, not the image id: a cached build can give an image that
    another tag (the user's ``kshim``) also names, and that one stays.
    """
    tag = f"kshim-test:{RUN_ID}"
    try:
        docker(
            "build", "--file", str(DOCKERFILE), "--tag", tag, str(ROOT), timeout_s=BUILD_TIMEOUT_S
        )
        yield tag
    finally:
        docker("image", "rm", tag, check=False)


def test_image_size_is_reported(
    image: str, capsys: pytest.CaptureFixture[str], record_property: RecordProperty
) -> None:
    size = int(docker("image", "inspect", "--format", "{{.Size}}", image))

    record_property("image_size_bytes", size)
    report(capsys, f"kshim image size: {size / 1e6:.1f} MB ({size} bytes)")
    assert 0 < size < IMAGE_SIZE_LIMIT_BYTES


def test_image_serves_a_record_turns_healthy_and_stops_cleanly(
    image: str, capsys: pytest.CaptureFixture[str], record_property: RecordProperty
) -> None:
    port = free_port()
    container = docker(
        "create",
        "--publish",
        f"127.0.0.1:{port}:9092",
        "--env",
        f"KSHIM_ADVERTISED_LISTENERS=PLAINTEXT://127.0.0.1:{port}",
        image,
    )
    topic = f"docker-smoke-{RUN_ID}"
    try:
        started = time.monotonic()
        docker("start", container)
        wait_for_probe("127.0.0.1", port, START_TIMEOUT_S)
        start_seconds = time.monotonic() - started
        record_property("start_seconds", round(start_seconds, 3))
        report(capsys, f"kshim container: health probe answered {start_seconds:.2f} s after start")

        assert advertised_brokers(f"127.0.0.1:{port}") == [("127.0.0.1", port)]
        produce(f"127.0.0.1:{port}", topic, b"through the image")
        assert consume(f"127.0.0.1:{port}", topic, 1) == [b"through the image"]
        # Docker's first probe runs one interval after start; failures in the start period
        # do not count, so a broker up in time is healthy by start period + interval.
        budget = health_check_seconds("start-period") + health_check_seconds("interval")
        assert wait_for_health(container, started + budget + HEALTH_MARGIN_S) == "healthy"

        docker(
            "stop", "-t", str(STOP_GRACE_S), container, timeout_s=STOP_GRACE_S + COMMAND_TIMEOUT_S
        )
        assert docker("inspect", "--format", "{{.State.ExitCode}}", container) == "0"
    finally:
        print(container_logs(container))  # shown by pytest when the test fails
        docker("rm", "--force", "--volumes", container, check=False)


def test_compose_broker_is_reached_by_its_service_name_and_from_the_host(
    image: str, tmp_path: Path
) -> None:
    reason = compose_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    # The image built above instead of building kshim:local, which the user may have.
    override = tmp_path / "image.yaml"
    override.write_text(f"services:\n  {COMPOSE_SERVICE}:\n    image: {image}\n")
    project = f"kshim-test-{RUN_ID}"
    compose = (
        "compose",
        "--project-name",
        project,
        "--file",
        str(COMPOSE_FILE),
        "--file",
        str(override),
    )
    topic = f"compose-smoke-{RUN_ID}"
    try:
        docker(
            *compose,
            "up",
            "--detach",
            "--no-build",
            "--wait",
            COMPOSE_SERVICE,
            timeout_s=COMPOSE_UP_TIMEOUT_S,
        )
        broker = docker(*compose, "ps", "--quiet", COMPOSE_SERVICE)
        networks = json.loads(
            docker("inspect", "--format", "{{json .NetworkSettings.Networks}}", broker)
        )
        assert len(networks) == 1, networks
        [network] = networks

        checked = run_to_completion(
            image, network, "python", "-m", "kshim.healthcheck", INTERNAL_BOOTSTRAP
        )
        inside = run_to_completion(
            image,
            network,
            "python",
            "-c",
            INSIDE_ROUND_TRIP,
            INTERNAL_BOOTSTRAP,
            topic,
            INSIDE_VALUE,
        )

        assert checked.startswith("healthy: "), checked
        assert inside.splitlines() == [INTERNAL_BOOTSTRAP, INSIDE_VALUE]
        assert advertised_brokers(EXTERNAL_BOOTSTRAP) == [("localhost", 19092)]
        assert consume(EXTERNAL_BOOTSTRAP, topic, 1) == [INSIDE_VALUE.encode()]
    finally:
        print(docker(*compose, "logs", "--no-color", COMPOSE_SERVICE, check=False))
        docker(
            *compose,
            "down",
            "--volumes",
            "--timeout",
            str(STOP_GRACE_S),
            check=False,
            timeout_s=STOP_GRACE_S + COMMAND_TIMEOUT_S,
        )

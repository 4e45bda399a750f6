"""The monitoring files in docker/: every query of the Grafana dashboard names metrics a
running kshim exports (read from a real scrape after some traffic), the panels use the
provisioned data source, and Prometheus scrapes the port the image serves metrics on."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kshim.testing import BrokerProcess, free_port

DOCKER = Path(__file__).resolve().parents[1] / "docker"
DASHBOARD = DOCKER / "grafana" / "dashboards" / "kshim.json"
TIMEOUT_S = 30.0
METRIC = re.compile(r"\bkshim_[a-z0-9_]+")
SUFFIXES = ("", "_total", "_bucket", "_count", "_sum", "_created")


def panels() -> list[dict[str, Any]]:
    dashboard = json.loads(DASHBOARD.read_text())
    found: list[dict[str, Any]] = dashboard["panels"]
    return found


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[set[str]]:
    """The metric names a broker exports once it has seen produce, a group, a view and a
    delayed record (some families appear only then)."""
    metrics_port = free_port()
    broker = BrokerProcess(
        tmp_path_factory.mktemp("dashboard") / "data",
        settings=[f"kshim.metrics.listen=127.0.0.1:{metrics_port}", "kshim.full.view=true"],
    ).start()
    try:
        _traffic(broker.bootstrap)
        text = _scrape_once_delays_show(f"http://127.0.0.1:{metrics_port}/metrics")
    finally:
        broker.stop()
    names = {line.split()[2] for line in text.splitlines() if line.startswith("# HELP ")}
    yield {name + suffix for name in names for suffix in SUFFIXES}


def _scrape_once_delays_show(url: str) -> str:
    """A scrape taken once the delayed record is in the schedule (read in the background;
    the schedule's families appear with its store)."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as answer:
            text: str = answer.read().decode()
        if 'kshim_delayed_pending{topic="orders"} 1.0' in text.splitlines():
            return text
        assert time.monotonic() < deadline, "the delayed record never showed"
        time.sleep(0.1)


def _traffic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic("orders", 1, 1)]).values():
        future.result(TIMEOUT_S)
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce("orders", b"v", b"k")
    due = str(int(time.time() * 1000) + 3_600_000).encode()
    producer.produce("orders.delay", b"later", b"k", headers=[("kshim-deliver-at", due)])
    assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "billing"})
    consumer.commit(offsets=[TopicPartition("orders", 0, 1)], asynchronous=False)
    consumer.close()


def test_every_query_names_metrics_kshim_exports(exported: set[str]) -> None:
    for panel in panels():
        for target in panel["targets"]:
            named = METRIC.findall(target["expr"])
            assert named, f"{panel['title']}: {target['expr']} names no kshim metric"
            missing = [name for name in named if name not in exported]
            assert not missing, f"{panel['title']}: {missing} not exported"


def test_the_dashboard_shows_what_an_operator_watches() -> None:
    queries = " ".join(target["expr"] for panel in panels() for target in panel["targets"])
    for metric in (
        "kshim_produced_records_total",  # throughput
        "kshim_request_duration_seconds_bucket",  # latency
        "kshim_group_lag",  # lag
        "kshim_transactions_open",  # transactions
        "kshim_alarms_active",  # alarms
        "kshim_data_dir_free_bytes",  # disk
    ):
        assert metric in queries, metric


def test_panels_use_the_provisioned_data_source() -> None:
    datasources = DOCKER / "grafana" / "provisioning" / "datasources" / "prometheus.yaml"
    uid = re.search(r"uid: (\S+)", datasources.read_text())
    assert uid is not None
    ids = [panel["id"] for panel in panels()]
    assert len(ids) == len(set(ids))
    for panel in panels():
        assert panel["datasource"]["uid"] == uid.group(1)
        assert all(target["datasource"]["uid"] == uid.group(1) for target in panel["targets"])


def test_prometheus_scrapes_the_port_the_image_serves_metrics_on() -> None:
    dockerfile = (DOCKER / "Dockerfile").read_text()
    port = re.search(r"kshim\.metrics\.listen=0\.0\.0\.0:(\d+)", dockerfile)
    assert port is not None
    assert f'targets: ["kshim:{port.group(1)}"]' in (DOCKER / "prometheus.yml").read_text()
    compose = (DOCKER / "compose.yaml").read_text()
    for mount in ("./prometheus.yml:", "./grafana/provisioning:", "./grafana/dashboards:"):
        assert mount in compose, mount
        assert (DOCKER / mount.removeprefix("./").rstrip(":")).exists(), mount

"""What SASL_SSL costs on kshim and on Apache Kafka, side by side in one run: each broker's
SASL_SSL records/s as a share of its own PLAINTEXT records/s.

    python -m benchmarks.security_kafka [--records-1kib 300000] [--records-100b 300000]
                                        [--records-java 100000] [--repeats 3]
                                        [--json benchmarks/results/security_kafka.json]

Both brokers run for the whole run, each with a PLAINTEXT and a SASL_SSL listener on
loopback, a certificate from one trustme CA (its key as PKCS#8 PEM, which both read: Kafka
as a PEM keystore, KIP-651) and the SCRAM-SHA-256 user stored through AlterUserScramCredentials
(KIP-554); TLS 1.3 is what both ends agree on. kshim runs at its defaults (fsync before every
acknowledgement); Kafka 3.9 from the pinned jars (``python -m kshim.jvm``) at its defaults.
Each repeat runs benchmarks.security's throughput shapes (confluent-kafka producing and
consuming 1 KiB and 100 B records, the raw wire client's 1 MiB Produce and Fetch requests,
the Java client when it can run) on one broker, then the other, the broker that goes first
alternating repeat by repeat; CPU and RSS are of each broker's whole process tree.

Targets: kshim's SASL_SSL keeps >= 0.8x of its PLAINTEXT records/s, and a ratio at least
Kafka's own, consuming and producing 1 KiB records with confluent-kafka. Prints Markdown
tables and writes them (``.md``) beside the JSON. The second table says who paced each
confluent-kafka run: the broker's cores and the client's busiest thread
(benchmarks/client_threads.py).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks import kafka_columns
from benchmarks.brokers import RunningBroker
from benchmarks.security import PROTOCOLS, Run, compare_runs, java_client, throughput_repeat
from benchmarks.security_clients import (
    PLAIN_PASSWORD,
    PLAIN_USER,
    SecureBroker,
    add_scram_user,
    make_certificates,
    running_secure,
)
from compat_tests.kafka_sources import REFERENCE_JARS, jars_command, launched
from kshim.jvm import artifacts
from kshim.testing import free_port

RATIO_TARGET = 0.8
TARGET_SHAPES = ("consume 1 KiB", "produce 1 KiB")
BROKERS = ("kshim", "kafka")
# Kafka sees a credential stored by AlterUserScramCredentials once its metadata log has
# it: a login tried sooner is refused, and librdkafka does not retry a refused login.
SCRAM_SETTLE_S = 2.0


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--records-1kib", type=int, default=300_000)
    parser.add_argument("--records-100b", type=int, default=300_000)
    parser.add_argument("--records-java", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default="benchmarks/results/security_kafka.json")
    arguments = parser.parse_args()
    reason = artifacts.unavailable_reason(REFERENCE_JARS)
    if reason is not None:
        raise SystemExit(f"Kafka cannot run here: {reason}")
    started = time.perf_counter()
    sizes = {1024: arguments.records_1kib, 100: arguments.records_100b}
    java = java_client(arguments.records_java)
    runs: dict[str, dict[str, dict[str, list[Run]]]] = {name: {} for name in BROKERS}
    with contextlib.ExitStack() as stack:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-tls-")))
        keystore, ca = make_certificates(directory)
        running = {
            "kshim": stack.enter_context(running_secure(directory / "kshim", (keystore, ca))),
            "kafka": stack.enter_context(running_secure_kafka(directory / "kafka", keystore, ca)),
        }
        idle_rss_mb = {name: broker.rss_bytes() / 1e6 for name, (broker, _) in running.items()}
        for repeat in range(arguments.repeats):
            for name in BROKERS if repeat % 2 == 0 else BROKERS[::-1]:
                broker, secure = running[name]
                throughput_repeat(broker, secure, sizes, repeat, java, runs[name])
    results: dict[str, Any] = {
        "command": "python -m benchmarks.security_kafka",
        "arguments": vars(arguments),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "finished": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "total_s": time.perf_counter() - started,
        "kafka": artifacts.artifact_set(REFERENCE_JARS).coordinates()[0],
        "idle_rss_mb": idle_rss_mb,
        "throughput": {name: compare_runs(found) for name, found in runs.items()},
    }
    results["targets"] = targets(results["throughput"])
    Path(arguments.json).write_text(json.dumps(results, indent=2) + "\n")
    table = render(results)
    Path(arguments.json).with_suffix(".md").write_text(table + "\n")
    print(table)


@contextlib.contextmanager
def running_secure_kafka(
    directory: Path, keystore: str, ca: str
) -> Iterator[tuple[RunningBroker, SecureBroker]]:
    """Kafka from the pinned jars with a PLAINTEXT and a SASL_SSL listener (SCRAM-SHA-256
    and PLAIN, as kshim's in benchmarks.security_clients); stopped when the block ends."""
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    settings = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": keystore,
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-256,PLAIN",
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        ),
        "listener.name.sasl_ssl.plain.sasl.jaas.config": (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'user_{PLAIN_USER}="{PLAIN_PASSWORD}";'
        ),
    }
    artifacts.resolve(REFERENCE_JARS)  # a cold Maven is not counted in the start
    template = f"{jars_command(REFERENCE_JARS, settings)} --listener SASL_SSL={port}"
    with launched(template) as kafka:
        kafka_columns.check_is_java(kafka.process.pid)
        broker = RunningBroker("kafka", kafka.bootstrap, kafka.process.pid, kafka.data_dir,
                               kafka.process, kafka.ready_s, kafka.process_group)  # fmt: skip
        secure = SecureBroker(kafka.bootstrap, f"127.0.0.1:{port}", ca)
        add_scram_user(secure)
        time.sleep(SCRAM_SETTLE_S)
        yield broker, secure


def targets(throughput: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per target shape: kshim's ratio, Kafka's, and whether kshim meets both targets."""
    found = {}
    for shape in TARGET_SHAPES:
        ours = throughput["kshim"][shape]["ratio_of_medians"]
        theirs = throughput["kafka"][shape]["ratio_of_medians"]
        found[shape] = {
            "kshim_ratio": ours,
            "kafka_ratio": theirs,
            "met": ours >= RATIO_TARGET and ours >= theirs,
        }
    return found


def render(results: dict[str, Any]) -> str:
    throughput = results["throughput"]
    lines = [
        f"SASL_SSL / PLAINTEXT, kshim and Kafka ({results['kafka']}), "
        f"{results['arguments']['repeats']} repeats, medians, records/s; "
        f"`{results['command']}`, {results['finished']}, {results['machine']['cpus']} CPUs",
        "",
        "| shape | kshim PLAINTEXT | kshim SASL_SSL | kshim ratio "
        "| Kafka PLAINTEXT | Kafka SASL_SSL | Kafka ratio |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for shape in throughput["kshim"]:
        cells = [shape]
        for name in BROKERS:
            compared = throughput[name].get(shape)
            if compared is None:
                cells += ["-", "-", "-"]
                continue
            medians = compared["median"]
            cells += [f"{medians[protocol]['records_per_s']:,.0f}" for protocol in PROTOCOLS]
            cells.append(f"{compared['ratio_of_medians']:.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", *_pacing(throughput)]
    lines += ["", f"Targets: kshim's ratio >= {RATIO_TARGET} and >= Kafka's:"]
    for shape, target in results["targets"].items():
        verdict = "met" if target["met"] else "missed"
        lines.append(
            f"- {shape}: kshim {target['kshim_ratio']:.2f}, Kafka {target['kafka_ratio']:.2f}: "
            f"{verdict}"
        )
    rss = ", ".join(f"{name} {mb:.1f} MB" for name, mb in results["idle_rss_mb"].items())
    lines.append(f"\nIdle RSS with both listeners (whole process tree): {rss}.")
    return "\n".join(lines)


def _pacing(throughput: dict[str, dict[str, Any]]) -> list[str]:
    """Who paced each confluent-kafka run: the broker's whole tree and the client's busiest
    thread (librdkafka's broker thread: protocol, TLS, socket), in shares of a core."""
    lines = [
        "Cores busy during the confluent-kafka runs (medians): broker's whole process tree / "
        "client's busiest thread (1.00: that thread paced the run)",
        "",
        "| shape | listener | kshim | Kafka |",
        "|---|---|---:|---:|",
    ]
    for shape, compared in throughput["kshim"].items():
        if "broker_cores" not in compared["median"][PROTOCOLS[0]]:
            continue
        for protocol in PROTOCOLS:
            cells = [shape, protocol]
            for name in BROKERS:
                median = throughput[name].get(shape, {}).get("median", {}).get(protocol, {})
                cells.append(
                    f"{median['broker_cores']:.2f} / {median['busiest_client_thread_cores']:.2f}"
                    if "broker_cores" in median
                    else "-"
                )
            lines.append("| " + " | ".join(cells) + " |")
    return lines


if __name__ == "__main__":
    main()

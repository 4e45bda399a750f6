"""benchmarks.run's Kafka columns, its targets as ratios to Kafka, and the README's table.

The runner and the README generator run as child processes (benchmarks sits above the test
trees, which do not import it), as a user runs them: on a report written here with chosen
figures, where each verdict depends on which broker a target is compared with; and, slow,
on tiny counts against Apache Kafka from the pinned jars, in its two settings.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from compat_tests.test_external_kafka import child_environment, run_child
from kshim.jvm import artifacts

pytestmark = pytest.mark.timeout(600)

ROOT = Path(__file__).resolve().parent.parent
BROKERS = ["kshim", "kafka", "kafka-fsync", "tansu"]
BEGIN = "<!-- begin: python -m benchmarks.readme -->"
END = "<!-- end: python -m benchmarks.readme -->"
# Per broker, the samples of a few metrics (three repeats, so that the median is tested);
# every target ratio below would get a different verdict against the other Kafka column.
SAMPLES = {
    "throughput": {
        "produce_100B_records_per_s": {"kshim": [80.0, 270.0, 300.0], "kafka": [200.0] * 3,
                                       "kafka-fsync": [250.0] * 3, "tansu": [50.0] * 3},
        "consume_raw_100B_records_per_s": {"kshim": [250.0] * 3, "kafka": [100.0] * 3,
                                       "kafka-fsync": [300.0] * 3, "tansu": [100.0] * 3},
        "broker_cpu_s": {"kshim": [1.0] * 3, "kafka": [3.0] * 3, "kafka-fsync": [3.0] * 3,
                         "tansu": [2.0] * 3},
    },
    "latency": {
        "p50_ms": {"kshim": [4.0] * 3, "kafka": [8.0] * 3, "kafka-fsync": [2.0] * 3,
                   "tansu": [130.0] * 3},
        "p99_ms": {"kshim": [30.0] * 3, "kafka": [40.0] * 3, "kafka-fsync": [10.0] * 3,
                   "tansu": [250.0] * 3},
    },
    "accumulation": {
        "idle_rss_mb": {"kshim": [30.0] * 3, "kafka": [400.0] * 3, "kafka-fsync": [90.0] * 3,
                        "tansu": [13.0] * 3},
    },
}  # fmt: skip


def samples_by_workload() -> dict[str, dict[str, list[dict[str, float]]]]:
    """SAMPLES turned around into what benchmarks.run records: workload -> broker -> one
    dict of metrics per repeat."""
    samples: dict[str, dict[str, list[dict[str, float]]]] = {}
    for workload, metrics in SAMPLES.items():
        by_broker = samples.setdefault(workload, {name: [{}, {}, {}] for name in BROKERS})
        for metric, values in metrics.items():
            for broker, series in values.items():
                for repeat, value in enumerate(series):
                    by_broker[broker][repeat][metric] = value
    return samples


def written_report(directory: Path, scale_name: str = "full") -> Path:
    """A report.json as a full run of the four brokers would leave it, with SAMPLES."""
    results: dict[str, Any] = {
        "generated_utc": "2026-11-28 10:00 UTC",
        "command": "python -m benchmarks.run",
        "elapsed_s": 1500.0,
        "machine": {"cpu": "Test CPU", "cores": 2, "memory_gb": 25.3, "kernel": "6.1",
                    "python": "3.11.7", "loopback_tcp_mb_per_s": 4000.0,
                    "data_disk_fsyncs_per_s": 8000.0},
        "scale": {"repeats": 3, "backlog_records": 200_000, "venus_records": 100_000},
        "scale_name": scale_name,
        "brokers": BROKERS,
        "skipped": {},
        "kafka": "Apache Kafka 3.9.2, its defaults",
        "kafka_columns": {"kafka": "Apache Kafka 3.9.2, its defaults",
                          "kafka-fsync": "Apache Kafka 3.9.2, fsync of every batch"},
        "not_measured": {},
        "processes": {"kshim": ["python"], "kafka": ["java"], "kafka-fsync": ["java"]},
        "broker_settings": {"kafka-fsync": {"log.flush.interval.messages": "1"}},
        "samples": samples_by_workload(),
        "full_view": [],
    }  # fmt: skip
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "report.json"
    path.write_text(json.dumps(results))
    return path


def rendered(directory: Path) -> dict[str, Any]:
    """``benchmarks.run --render-only`` on ``directory``; its rewritten report.json."""
    arguments = ["benchmarks.run", "--render-only", "--output", str(directory)]
    status, printed = run_child(arguments, child_environment())
    assert status == 0, printed
    results: dict[str, Any] = json.loads((directory / "report.json").read_text())
    return results


def test_each_target_is_a_ratio_to_its_kafka_column(tmp_path: Path) -> None:
    written_report(tmp_path)

    results = rendered(tmp_path)

    rows = {row["label"]: row for row in results["targets"]}
    produce = rows["produce 100 B, records/s"]  # Kafka at its defaults: 200, not 250
    assert (produce["reference"], produce["kshim"], produce["reference_value"]) == (
        "kafka", 270.0, 200.0)  # fmt: skip
    assert produce["ratio"] == pytest.approx(1.35) and produce["met"] is True
    assert produce["tansu_ratio"] == pytest.approx(5.4)
    consume = rows["consume 100 B, records/s"]  # plain kafka's 100, not 300
    assert (consume["reference"], consume["ratio"], consume["met"]) == ("kafka", 2.5, True)
    p50, p99 = (
        rows["e2e latency p50 at 1,000 rec/s, ms"],
        rows["e2e latency p99 at 1,000 rec/s, ms"],
    )
    assert (p50["reference"], p50["ratio"], p50["met"]) == ("kafka", 0.5, True)
    assert p99["ratio"] == 0.75 and p99["met"] is False  # within 1x kafka, not < 10 ms
    idle = rows["idle RSS, MB"]
    assert (idle["reference"], idle["met"]) == ("kafka", True)
    assert idle["ratio"] == pytest.approx(0.075)
    assert rows["VENUS row changes, kafka-python, s"]["met"] is None  # not in this run
    report = (tmp_path / "report.md").read_text()
    assert (
        "| target | kshim | kafka | kafka-fsync | tansu | kshim / Kafka | kshim / Tansu |" in report
    )
    assert (
        "| produce 100 B, records/s | 270.0 | 200.0 | 250.0 | 50.0 | 1.35x kafka | 5.40x |"
        in report
    )
    assert (
        "| e2e latency p99 at 1,000 rec/s, ms | 30.0 | 40.0 | 10.0 | 250.0 | 0.75x kafka " in report
    )
    cpu = "| throughput.broker_cpu_s | 1 (1-1) | 3 (3-3) | 3 (3-3) | 2 (2-2) |"
    assert f"{cpu} 0.33x | 0.33x | 0.50x |" in report
    assert "- kafka-fsync ran with `log.flush.interval.messages=1`" in report
    assert "kafka: java; kafka-fsync: java" in report


def test_the_readme_table_puts_each_headline_on_one_row(tmp_path: Path) -> None:
    written_report(tmp_path)
    rendered(tmp_path)

    table = (tmp_path / "readme_table.md").read_text()

    assert "| measurement | kshim | kafka | kafka-fsync | tansu | kshim / Kafka |" in table
    assert ("| e2e latency p50 / p99 at 1,000 rec/s, ms | 4 / 30.0 | 8 / 40.0 | 2 / 10.0 | "
            "130.0 / 250.0 | 0.50x / 0.75x kafka | 0.03x / 0.12x | <= 1x kafka / <= 1x kafka "
            "and < 10 ms | met / **missed** |") in table  # fmt: skip
    assert "| produce 100 B / 1 KiB, records/s | 270.0 / - | 200.0 / - |" in table
    assert "Last run: 2026-11-28 10:00 UTC, `python -m benchmarks.run`, 25 minutes" in table


def readme_with_block(path: Path, block: str) -> Path:
    path.write_text(f"# Title\n\n## Performance\n\n{BEGIN}\n{block}\n{END}\n\n## Next\n")
    return path


def test_the_readme_block_is_rewritten_from_the_report_and_checked(tmp_path: Path) -> None:
    report = written_report(tmp_path / "run")
    rendered(tmp_path / "run")
    readme = readme_with_block(tmp_path / "README.md", "typed by hand")
    generate = ["benchmarks.readme", "--report", str(report), "--readme", str(readme)]

    stale, _ = run_child([*generate, "--check"], child_environment())
    status, printed = run_child(generate, child_environment())
    fresh, _ = run_child([*generate, "--check"], child_environment())

    assert (stale, status, fresh) == (1, 0, 0), printed
    table = (tmp_path / "run" / "readme_table.md").read_text()
    assert readme.read_text() == (
        f"# Title\n\n## Performance\n\n{BEGIN}\n{table.rstrip()}\n{END}\n\n## Next\n"
    )


def test_the_readme_takes_no_table_from_a_smoke_run_or_a_file_without_markers(
    tmp_path: Path,
) -> None:
    smoke = written_report(tmp_path / "smoke", "smoke")
    full = written_report(tmp_path / "full")
    readme = readme_with_block(tmp_path / "README.md", "kept")
    unmarked = tmp_path / "UNMARKED.md"
    unmarked.write_text("# Title\n")

    from_smoke = run_child(["benchmarks.readme", "--report", str(smoke), "--readme",
                            str(readme)], child_environment())  # fmt: skip
    no_markers = run_child(["benchmarks.readme", "--report", str(full), "--readme",
                            str(unmarked)], child_environment())  # fmt: skip

    assert from_smoke[0] == 2 and "from a --smoke run" in from_smoke[1]
    assert "kept" in readme.read_text()
    assert no_markers[0] == 2 and f"one line {BEGIN}" in no_markers[1]


def test_a_report_from_before_the_kafka_columns_still_renders(tmp_path: Path) -> None:
    """benchmarks/results keeps reports of earlier runs (kshim and Tansu only)."""
    path = written_report(tmp_path)
    old = json.loads(path.read_text())
    for key in ("kafka_columns", "processes", "broker_settings", "scale_name"):
        del old[key]
    old["brokers"] = ["kshim", "tansu"]
    old["samples"] = {
        workload: {name: copy.deepcopy(by_broker[name]) for name in old["brokers"]}
        for workload, by_broker in old["samples"].items()
    }
    path.write_text(json.dumps(old))

    results = rendered(tmp_path)

    produce = {row["label"]: row for row in results["targets"]}["produce 100 B, records/s"]
    assert (produce["ratio"], produce["tansu_ratio"], produce["met"]) == (None, 5.4, None)
    assert (
        "| produce 100 B, records/s | 270.0 | 50.0 | - | 5.40x |"
        in (tmp_path / "report.md").read_text()
    )


def test_the_runner_knows_the_kafka_columns() -> None:
    status, printed = run_child(
        ["benchmarks.run", "--smoke", "--brokers", "kshim,kafka5"], child_environment()
    )

    assert status == 2
    assert "unknown brokers ['kafka5']" in printed
    assert "kshim, tansu, kafka, kafka-fsync, kafka4" in printed


def kafka_jars_problem() -> str | None:
    return artifacts.unavailable_reason("kafka")


@pytest.mark.slow
def test_kafka_with_fsync_runs_from_the_jars_measured_as_a_jvm(tmp_path: Path) -> None:
    if reason := kafka_jars_problem():
        pytest.skip(reason)
    # Throughput and latency: the JVM's whole-tree CPU and memory, the acknowledgement
    # setting read back. Kafka at its defaults runs beside kshim in the CI quick benchmark
    # (scripts/test.sh), every workload of it, so it is not started a third time here.
    arguments = ["benchmarks.run", "--smoke", "--workloads", "throughput,latency",
                 "--brokers", "kshim,kafka-fsync", "--output", str(tmp_path)]  # fmt: skip

    status, printed = run_child(arguments, child_environment())

    assert status == 0, printed
    results = json.loads((tmp_path / "report.json").read_text())
    assert (results["brokers"], results["skipped"]) == (["kshim", "kafka-fsync"], {})
    flushes = {name: settings["log.flush.interval.messages"]
               for name, settings in results["broker_settings"].items()}  # fmt: skip
    assert flushes == {"kafka-fsync": "1"}  # ours, read back from the broker
    assert results["processes"]["kafka-fsync"] == ["java"]
    assert "kafka_2.13:3.9.2" in results["kafka_columns"]["kafka-fsync"]
    [throughput] = results["samples"]["throughput"]["kafka-fsync"]
    [latency] = results["samples"]["latency"]["kafka-fsync"]
    assert throughput["produce_100B_records_per_s"] > 0
    assert throughput["broker_cpu_s"] > 0 and throughput["broker_peak_rss_mb"] > 100
    assert latency["records"] == 1000 and latency["p99_ms"] >= latency["p50_ms"] > 0
    assert latency["fetch_wait_10ms_records"] == 1000
    assert latency["ack_p99_ms"] >= latency["ack_p50_ms"] > 0
    fsync_median = results["summary"]["throughput.produce_100B_records_per_s"]["kafka-fsync"]
    assert fsync_median["median"] == throughput["produce_100B_records_per_s"]
    table = (tmp_path / "readme_table.md").read_text()
    assert "| measurement | kshim | kafka-fsync | kshim / Kafka | wanted | result |" in table


@pytest.mark.slow
def test_kafka_4_runs_when_named(tmp_path: Path) -> None:
    if reason := artifacts.unavailable_reason("kafka4"):
        pytest.skip(reason)
    arguments = ["benchmarks.run", "--smoke", "--workloads", "throughput", "--brokers",
                 "kafka4", "--output", str(tmp_path)]  # fmt: skip

    status, printed = run_child(arguments, child_environment())

    assert status == 0, printed
    results = json.loads((tmp_path / "report.json").read_text())
    [sample] = results["samples"]["throughput"]["kafka4"]
    assert sample["consume_1KiB_records_per_s"] > 0 and sample["broker_peak_rss_mb"] > 100
    assert results["processes"]["kafka4"] == ["java"]
    assert ":4." in results["kafka_columns"]["kafka4"]

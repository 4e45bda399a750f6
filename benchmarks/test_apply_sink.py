"""benchmarks.apply_sink: the sink measured on this tree and on a baseline, side by side."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import apply_sink

ROOT = Path(__file__).resolve().parent.parent


def test_both_trees_are_measured_and_written(tmp_path: Path) -> None:
    output = tmp_path / "sink"
    apply_sink.main(["--records", "600", "--rounds", "1", "--engines", "sqlite",
                     "--baseline", str(ROOT), "--output", str(output)])  # fmt: skip
    document = json.loads(output.with_suffix(".json").read_text())
    runs = document["samples"]["sqlite"]
    assert sorted(runs) == ["baseline", "this tree"]
    for [figures] in runs.values():
        assert figures["decode_us_per_record"] > 0 and figures["apply_us_per_record"] > 0
    assert "| sqlite | apply_us_per_record |" in output.with_suffix(".md").read_text()


def test_the_records_are_the_captures_own_and_decode() -> None:
    from spark_examples.apply.sink import decode_kshim

    records = apply_sink.captured(300)
    assert [record.offset for record in records] == list(range(300))
    deletes = [record for record in records if record.value is None]
    assert 0 < len(deletes) < 150
    for record in records:
        decode_kshim(record, lambda table: None)

"""The one-command demo, small: it must end with every destination equal and exit 0.

Runs ``python -m spark_examples.demo`` as a child process (it builds its own SparkSession and
broker and stops them). Skipped without the connector jars.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from spark_examples.testing import REPOSITORY_ROOT
from tests.sync.spark_marks import SPARK_PIPELINE

pytestmark = SPARK_PIPELINE


def test_the_demo_reports_every_destination_equal(tmp_path: Path) -> None:
    command = [
        sys.executable, "-m", "spark_examples.demo", "--operations", "1500", "--rate", "300",
        "--work-dir", str(tmp_path / "demo"),
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=360, check=False,
                            cwd=REPOSITORY_ROOT)  # fmt: skip
    # The head of stderr: an error's first lines (Spark's own come after them, long).
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[:5000]
    lines = result.stdout.splitlines()
    assert sum("EQUAL to the source" in line and "NOT" not in line for line in lines) == 3
    assert any("bootstrapping a new destination from shop.full" in line for line in lines)
    assert "ALL EQUAL" in lines[-1]

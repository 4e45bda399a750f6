"""The one-command demo, small, as the README types it: ``bash scripts/demo.sh``, which
builds its own environment (.venv-demo, kshim with the ``demo`` extra) and runs
``python -m spark_examples.demo`` in it; it must end with every destination equal and exit 0.
Skipped without the connector jars. Without the demo's packages, the demo says in one line
how to get them, before it starts anything.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from spark_examples.testing import REPOSITORY_ROOT
from tests.sync.spark_marks import SPARK_PIPELINE

pytestmark = SPARK_PIPELINE


@pytest.mark.timeout(900)
def test_the_demo_reports_every_destination_equal(tmp_path: Path) -> None:
    command = [
        "bash", "scripts/demo.sh", "--operations", "1500", "--rate", "300",
        "--work-dir", str(tmp_path / "demo"),
    ]  # fmt: skip
    # The first run on a machine builds .venv-demo from pip's cache: a minute or two more.
    result = subprocess.run(command, capture_output=True, text=True, timeout=720, check=False,
                            cwd=REPOSITORY_ROOT)  # fmt: skip
    # The head of stderr: an error's first lines (Spark's own come after them, long).
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[:5000]
    lines = result.stdout.splitlines()
    assert sum("EQUAL to the source" in line and "NOT" not in line for line in lines) == 3
    assert any("bootstrapping a new destination from shop.full" in line for line in lines)
    assert "ALL EQUAL" in lines[-1]


def test_without_its_packages_the_demo_says_how_to_get_them() -> None:
    """An environment without the demo extra (the broker's own, .venv-serve): one line."""
    hidden = "import sys; sys.modules.update(pyspark=None, confluent_kafka=None); "
    run = "import runpy; runpy.run_module('spark_examples.demo', run_name='__main__')"
    result = subprocess.run(
        [sys.executable, "-c", hidden + run], capture_output=True, text=True, timeout=60,
        check=False, cwd=REPOSITORY_ROOT,
    )  # fmt: skip
    assert (result.returncode, result.stdout) == (2, ""), result
    assert result.stderr.splitlines() == [
        "demo: error: pyspark, confluent-kafka not installed: run bash scripts/demo.sh, which "
        "installs them (or pip install -e '.[demo]')"
    ]

"""``python -m spark_examples.apply``: the apply job on a local SparkSession (see job.py)."""

from __future__ import annotations

import sys

from spark_examples.apply.job import main

if __name__ == "__main__":
    sys.exit(main())

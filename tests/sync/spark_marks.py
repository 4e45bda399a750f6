"""The marks of the tests that run the pipeline through Spark's Kafka connector.

They are slow, and skip with the reason (one line saying what to run) without Java, or
without both the connector's jars and Maven to fetch them (spark_examples/spark_session.py).
"""

from __future__ import annotations

import pytest

from spark_examples.spark_session import connector_unavailable_reason

UNAVAILABLE = connector_unavailable_reason()

SPARK_PIPELINE = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.skipif(UNAVAILABLE is not None, reason=UNAVAILABLE or ""),
    pytest.mark.timeout(400),
]

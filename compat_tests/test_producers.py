"""Producer role x client: plain, idempotent and transactional producers.

Each client under test writes; the reference client (kafka-python, assign mode) reads back
and must see exactly the records, offsets, keys, values, headers and timestamps written.
The Java producer (Spark's sink) is in test_spark.py.
"""

from __future__ import annotations

import uuid

import pytest

from compat_tests.brokers import BrokerUnderTest
from compat_tests.clients import (
    ALL_DATA_OFFSETS,
    TRANSACTION_STEPS,
    TRANSACTIONAL_END_OFFSET,
    client_params,
)
from compat_tests.deviations import TANSU_INIT_PRODUCER_ID_V0, deviates
from compat_tests.drivers import admin_driver, driver
from compat_tests.support import (
    RECORD_COUNT,
    comparable,
    create_topic,
    halves,
    records_for,
    reference,
    require_client,
    require_transactions,
)
from tests.e2e.client_helpers import expected_records, sample_records

pytestmark = pytest.mark.timeout(120)

TRANSACTION_RECORDS = sum(count for _, count in TRANSACTION_STEPS)


@pytest.mark.compat_smoke
@pytest.mark.producer_plain
@pytest.mark.headers
@pytest.mark.null_records
@pytest.mark.parametrize("client", client_params("kafka-python", "aiokafka", "confluent", "kcat"))
def test_plain_producer(broker: BrokerUnderTest, client: str) -> None:
    require_client(client)
    topic = create_topic(broker, f"plain-{client}")
    records = records_for(client)

    offsets = driver(client).produce(broker.bootstrap, topic, halves(records))

    if client != "kcat":  # kcat reports no offsets; the read-back checks them
        assert offsets == list(range(RECORD_COUNT))
    consumed = reference().consume(broker.bootstrap, topic, RECORD_COUNT)
    assert comparable(client, consumed) == comparable(client, expected_records(records))


@pytest.mark.producer_idempotent
@deviates(TANSU_INIT_PRODUCER_ID_V0, client="aiokafka")
@pytest.mark.parametrize("client", client_params("kafka-python", "aiokafka", "confluent", "kcat"))
def test_idempotent_producer(broker: BrokerUnderTest, client: str) -> None:
    """Two idempotent producers in turn (two producer ids): every record exactly once."""
    require_client(client)
    topic = create_topic(broker, f"idempotent-{client}")
    records = records_for(client, 2 * RECORD_COUNT)
    first, second = records[:RECORD_COUNT], records[RECORD_COUNT:]
    producer = driver(client)

    offsets = producer.produce(broker.bootstrap, topic, halves(first), idempotent=True)
    offsets += producer.produce(broker.bootstrap, topic, halves(second), idempotent=True)

    if client != "kcat":
        assert offsets == list(range(2 * RECORD_COUNT))
    consumed = reference().consume(broker.bootstrap, topic, 2 * RECORD_COUNT)
    assert comparable(client, consumed) == comparable(client, expected_records(records))


@pytest.mark.producer_transactional
@deviates(TANSU_INIT_PRODUCER_ID_V0, client="aiokafka")
@pytest.mark.parametrize("client", client_params("kafka-python", "aiokafka", "confluent"))
def test_transactional_producer(broker: BrokerUnderTest, client: str) -> None:
    """commit, abort, commit: data offsets skip one offset per transaction marker.

    read_uncommitted sees every data record, aborted ones included, and the log ends after
    the last COMMIT marker. (What read_committed consumers see is test_consumers.py's.)
    """
    require_transactions(broker)
    topic = create_topic(broker, f"txn-{client}")
    records = sample_records(TRANSACTION_RECORDS)

    offsets = admin_driver(client).produce_transactions(
        broker.bootstrap, topic, records, f"compat-txn-{uuid.uuid4().hex[:8]}"
    )

    assert offsets == list(ALL_DATA_OFFSETS)
    consumed = reference().consume(broker.bootstrap, topic, TRANSACTION_RECORDS)
    assert [record.offset for record in consumed] == list(ALL_DATA_OFFSETS)
    assert [(record.key, record.value) for record in consumed] == [
        (record.key, record.value) for record in records
    ]
    assert reference().watermarks(broker.bootstrap, topic) == (0, TRANSACTIONAL_END_OFFSET)

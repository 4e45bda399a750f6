"""Consumer role x client: assign + seek, and read_committed with and without transactions.

The reference client (kafka-python) writes; each client under test reads. Group consumers
are in test_groups.py, the Java consumer (Spark's source) in test_spark.py.
"""

from __future__ import annotations

import uuid

import pytest

from compat_tests.brokers import BrokerUnderTest
from compat_tests.clients import (
    COMMITTED_OFFSETS,
    SHORT_WAIT_S,
    TRANSACTION_STEPS,
    client_params,
    text_records,
)
from compat_tests.deviations import TANSU_ABORTED_TRANSACTIONS, deviates
from compat_tests.drivers import driver
from compat_tests.support import (
    MIDDLE_OFFSET,
    RECORD_COUNT,
    create_topic,
    halves,
    reference,
    require_client,
    require_transactions,
)
from tests.e2e.client_helpers import SampleRecord, expected_records, sample_records

pytestmark = pytest.mark.timeout(120)

CONSUMERS = client_params("kafka-python", "aiokafka", "confluent", "kcat")


def written_for(client: str, count: int = RECORD_COUNT) -> list[SampleRecord]:
    """Records the reference writes for ``client`` to read: printable ones for kcat."""
    return text_records(count) if client == "kcat" else sample_records(count)


@pytest.mark.compat_smoke
@pytest.mark.consumer_assign
@pytest.mark.parametrize("client", CONSUMERS)
def test_assign_and_seek_consumer(broker: BrokerUnderTest, client: str) -> None:
    """From the beginning, then from an offset inside the second (lz4-compressed) batch."""
    require_client(client)
    topic = create_topic(broker, f"assign-{client}")
    records = written_for(client)
    first, second = halves(records)
    writer = reference()
    assert writer.produce(broker.bootstrap, topic, [first]) == list(range(len(first)))
    offsets = writer.produce(broker.bootstrap, topic, [second], compression="lz4")
    assert offsets == list(range(len(first), RECORD_COUNT))
    consumer = driver(client)

    from_start = consumer.consume(broker.bootstrap, topic, RECORD_COUNT)
    from_middle = consumer.consume(
        broker.bootstrap, topic, RECORD_COUNT - MIDDLE_OFFSET, start=MIDDLE_OFFSET
    )

    assert from_start == expected_records(records)
    assert from_middle == expected_records(records)[MIDDLE_OFFSET:]


@pytest.mark.consumer_assign
@pytest.mark.read_committed
@pytest.mark.parametrize("client", CONSUMERS)
def test_read_committed_without_transactions(broker: BrokerUnderTest, client: str) -> None:
    """No transaction is open, so the last stable offset is the high watermark."""
    require_client(client)
    topic = create_topic(broker, f"rc-plain-{client}")
    records = written_for(client)
    assert reference().produce(broker.bootstrap, topic, halves(records)) == list(
        range(RECORD_COUNT)
    )

    consumed = driver(client).consume(broker.bootstrap, topic, RECORD_COUNT, read_committed=True)

    assert consumed == expected_records(records)


@pytest.mark.read_committed
@pytest.mark.producer_transactional
@deviates(TANSU_ABORTED_TRANSACTIONS)
@pytest.mark.parametrize("client", CONSUMERS)
def test_read_committed_skips_aborted_records(broker: BrokerUnderTest, client: str) -> None:
    """The reference writes commit, abort, commit; read_committed returns committed data only.

    read_uncommitted returns the aborted records too (offsets 4 and 5).
    """
    require_client(client)
    require_transactions(broker)
    topic = create_topic(broker, f"rc-txn-{client}")
    records = written_for(client, sum(count for _, count in TRANSACTION_STEPS))
    reference().produce_transactions(
        broker.bootstrap, topic, records, f"compat-rc-{uuid.uuid4().hex[:8]}"
    )
    consumer = driver(client)

    committed = consumer.consume(
        broker.bootstrap, topic, len(COMMITTED_OFFSETS), read_committed=True
    )
    # Nothing follows: offset 8 is the last COMMIT marker, and the log ends at 9.
    after = consumer.consume(
        broker.bootstrap,
        topic,
        1,
        start=COMMITTED_OFFSETS[-1] + 1,
        read_committed=True,
        wait_s=SHORT_WAIT_S,
    )

    committed_records = [records[0], records[1], records[2], records[5]]
    assert [record.offset for record in committed] == list(COMMITTED_OFFSETS)
    assert [(record.key, record.value) for record in committed] == [
        (record.key, record.value) for record in committed_records
    ]
    assert after == []


@pytest.mark.consumer_assign
@pytest.mark.parametrize("client", client_params("kafka-python", "aiokafka", "confluent"))
def test_a_position_past_the_end_resets_to_the_earliest(
    broker: BrokerUnderTest, client: str
) -> None:
    """Fetch refuses the position with OFFSET_OUT_OF_RANGE, and no offsets (-1) as Kafka's
    ReplicaManager sends none; the consumer places itself again by auto.offset.reset
    (earliest, the drivers' setting) through ListOffsets and reads everything."""
    require_client(client)
    topic = create_topic(broker, f"reset-{client}")
    records = sample_records(RECORD_COUNT)
    assert reference().produce(broker.bootstrap, topic, [records]) == list(range(RECORD_COUNT))

    consumed = driver(client).consume(
        broker.bootstrap, topic, RECORD_COUNT, start=RECORD_COUNT + 100
    )

    assert consumed == expected_records(records)
